-- CR² at the default α and the given λ values: test risk (solvable rows and all rows), local rate,
-- accuracy and cost, with the gate's false defers; beside the teacher-referenced risk, the realised risks on the
-- real labels over all rows (oracle disagreement, avoidable error; issue 26) and the local accuracy.
SELECT o.lam, o.alpha, o.risk, o.risk_all, o.oracle_risk_all, o.avoidable_risk_all, o.local_accuracy, o.local_rate,
       o.accuracy, o.cost, g.false_defer
FROM operating_points o
LEFT JOIN v_gate_errors g ON g.run_id = o.run_id AND g.lam = o.lam AND g.alpha = o.alpha
WHERE o.run_id = $run_id AND o.method = 'cr2' AND o.benchmark = 'all' AND abs(o.alpha - $alpha) < 1e-12
  AND list_contains($lams, o.lam)
ORDER BY o.lam
