-- Every method's operating points at the given λ values (CR² at the given α; uncalibrated methods at α NULL),
-- benchmark 'all', with the paired bootstrap interval of each metric (v_operating_points_ci).
SELECT o.method, o.lam, o.accuracy, o.accuracy_lower, o.accuracy_upper, o.cost, o.cost_lower, o.cost_upper,
       o.local_rate, o.local_rate_lower, o.local_rate_upper, o.risk, o.risk_lower, o.risk_upper
FROM v_operating_points_ci o
JOIN methods m USING (run_id, method)
WHERE o.run_id = $run_id AND o.benchmark = 'all' AND list_contains($lams, o.lam)
  AND (m.kind IN ('baseline', 'baseline-variant', 'reference') OR (o.method = 'cr2' AND abs(o.alpha - $alpha) < 1e-12))
ORDER BY o.lam, m.sort_order, o.method
