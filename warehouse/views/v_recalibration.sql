-- Re-calibration on a new channel-state distribution (docs/operations.md): CR² at each (λ, α) for every
-- evaluation run, with the distribution its test states came from (test_dist_id) and the one its thresholds
-- were calibrated on (threshold_dist_id). Old thresholds under new states vs re-calibrated ones: does the
-- risk hold, and how do cost and accuracy shift?
SELECT o.run_id, r.created_at, r.threshold_version, t.threshold_dist_id, r.dist_id AS test_dist_id,
       t.gate_fingerprint, o.lam, o.alpha, o.risk, o.local_rate, o.accuracy, o.cost
FROM operating_points o
JOIN eval_runs r USING (run_id)
JOIN (SELECT version, any_value(dist_id) AS threshold_dist_id, any_value(gate_fingerprint) AS gate_fingerprint
      FROM thresholds GROUP BY version) t ON t.version = r.threshold_version
WHERE o.method = 'cr2' AND o.benchmark = 'all'
