-- CR² at one α and the given λ values under the deployed rule and every compared rule (v_realised_risk):
-- the teacher-referenced risk the paper's α bounds beside the realised risks on the real labels, with local
-- accuracy, local rate and cost. Parameters: $run_id, $alpha, $lams.
SELECT rule, lam, alpha, teacher_risk, oracle_risk, avoidable_risk, local_accuracy, local_rate, cost, accuracy
FROM v_realised_risk
WHERE run_id = $run_id AND abs(alpha - $alpha) < 1e-12 AND list_contains($lams, lam)
  AND (method = 'cr2' OR rule <> (SELECT any_value(rule) FROM v_realised_risk WHERE run_id = $run_id AND method = 'cr2'))
ORDER BY lam, CASE WHEN method = 'cr2' THEN 0 ELSE 1 END, rule
