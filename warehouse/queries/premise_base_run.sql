-- The newest evaluation run of a label source and state distribution, with the gate its threshold table
-- calibrated: the base cell of the premise map. Parameters: $label_source, $dist_id.
SELECT r.run_id, r.threshold_version, min(t.gate_fingerprint) AS gate_fingerprint
FROM eval_runs r
JOIN thresholds t ON t.version = r.threshold_version
WHERE r.label_source = $label_source AND r.dist_id = $dist_id
GROUP BY r.run_id, r.threshold_version, r.created_at
ORDER BY r.created_at DESC
LIMIT 1
