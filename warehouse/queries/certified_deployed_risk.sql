-- Beside every validity verdict (`cr2 results`, `cr2 guarantees`): the deployed threshold table's own test risk of
-- each certified router `<router>@<rule>` of one evaluation run. The verdict's re-splits re-calibrate on random draws;
-- these rows are the one table the certify stage calibrated on val, evaluated on test. Per (method, λ, α) and each
-- risk over all test rows in $metrics (cr2.evaluation.metrics.RISK_ALL_METRICS: risk_all, oracle_risk_all,
-- avoidable_risk_all): its value on the test split and its 95 % paired-bootstrap interval where the run stores one
-- (table intervals; lower / upper NULL where it does not).
-- Parameters: $run_id, $metrics.
SELECT m.method, m.lam, m.alpha, m.metric, m.value, i.lower, i.upper, i.n_resamples
FROM metrics m
LEFT JOIN intervals i
       ON i.run_id = m.run_id AND i.method = m.method AND i.lam = m.lam AND i.alpha = m.alpha
      AND i.benchmark = 'all' AND i.metric = m.metric
WHERE m.run_id = $run_id AND m.benchmark = 'all' AND contains(m.method, '@') AND m.alpha IS NOT NULL
  AND list_contains($metrics, m.metric)
ORDER BY m.method, m.alpha, m.lam, m.metric
