-- Validity over re-splits of every certified router (`cr2 guarantees`, `cr2 results`, the report, docs/results.md):
-- per evaluation run, certified method `<router>@<rule>`, λ and α, the Monte-Carlo mean of the test risk over the
-- certify stage's random calibration/test re-splits of val ∪ test, its standard error and the number of re-splits
-- (metrics resplit_risk_*). The one stored source of these verdicts: cr2.report.validity applies the one-sided test
-- per λ and Holm over the λ cells of each (method, α) (cr2.evaluation.validity; docs/guarantees.md).
SELECT run_id, method, lam, alpha,
       max(value) FILTER (WHERE metric = 'resplit_risk_mean') AS risk_mean,
       max(value) FILTER (WHERE metric = 'resplit_risk_se')   AS risk_se,
       max(value) FILTER (WHERE metric = 'resplit_risk_n')    AS n_resplits
FROM metrics
WHERE benchmark = 'all' AND contains(method, '@')
  AND metric IN ('resplit_risk_mean', 'resplit_risk_se', 'resplit_risk_n')
GROUP BY run_id, method, lam, alpha
