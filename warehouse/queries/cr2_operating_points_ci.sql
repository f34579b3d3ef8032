-- CR² at the default α and the given λ values: test risk (solvable rows and all rows), local rate,
-- accuracy and cost, each with its paired bootstrap interval (v_operating_points_ci), and the gate's false defers;
-- beside the teacher-referenced risk, the realised risks on the real labels over all rows (oracle disagreement,
-- avoidable error) with their intervals, and the local accuracy.
SELECT o.lam, o.alpha, o.risk, o.risk_lower, o.risk_upper, o.risk_all,
       o.oracle_risk_all, o.oracle_risk_all_lower, o.oracle_risk_all_upper,
       o.avoidable_risk_all, o.avoidable_risk_all_lower, o.avoidable_risk_all_upper, o.local_accuracy,
       o.local_rate, o.local_rate_lower, o.local_rate_upper, o.accuracy, o.accuracy_lower, o.accuracy_upper,
       o.cost, o.cost_lower, o.cost_upper, o.n_resamples, g.false_defer
FROM v_operating_points_ci o
LEFT JOIN v_gate_errors g ON g.run_id = o.run_id AND g.lam = o.lam AND g.alpha = o.alpha
WHERE o.run_id = $run_id AND o.method = 'cr2' AND o.benchmark = 'all' AND abs(o.alpha - $alpha) < 1e-12
  AND list_contains($lams, o.lam)
ORDER BY o.lam
