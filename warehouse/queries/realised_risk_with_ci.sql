-- For docs/results.md, "What α bounds": CR² at one α and the given λ values under the deployed rule and every
-- compared rule (v_realised_risk), each risk, the local rate, cost and accuracy with its 95 % paired-bootstrap
-- interval over the test queries (v_operating_points_ci, benchmark 'all'), and the row counts.
-- Parameters: $run_id, $alpha, $lams.
SELECT r.method, r.rule, r.lam, r.alpha,
       r.teacher_risk,   c.risk_all_lower AS teacher_risk_lower,   c.risk_all_upper AS teacher_risk_upper,
       r.oracle_risk,    c.oracle_risk_all_lower AS oracle_risk_lower, c.oracle_risk_all_upper AS oracle_risk_upper,
       r.avoidable_risk, c.avoidable_risk_all_lower AS avoidable_risk_lower,
                         c.avoidable_risk_all_upper AS avoidable_risk_upper,
       r.local_accuracy,
       r.local_rate, c.local_rate_lower, c.local_rate_upper,
       r.cost, c.cost_lower, c.cost_upper,
       r.accuracy, c.accuracy_lower, c.accuracy_upper,
       r.n_risk, c.n AS n_evaluable, c.n_resamples
FROM v_realised_risk r
LEFT JOIN v_operating_points_ci c
       ON c.run_id = r.run_id AND c.method = r.method AND c.lam = r.lam AND c.alpha IS NOT DISTINCT FROM r.alpha
      AND c.benchmark = 'all'
WHERE r.run_id = $run_id AND abs(r.alpha - $alpha) < 1e-12 AND list_contains($lams, r.lam)
  AND (r.method = 'cr2' OR r.rule <> (SELECT any_value(rule) FROM v_realised_risk WHERE run_id = $run_id AND method = 'cr2'))
ORDER BY r.lam, CASE WHEN r.method = 'cr2' THEN 0 ELSE 1 END, r.rule
