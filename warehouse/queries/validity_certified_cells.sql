-- Validity over re-splits of every certified router (`cr2 guarantees`, `cr2 results`, the report, docs/results.md):
-- per certified method `<router>@<rule>`, λ and α of one evaluation run, the Monte-Carlo mean of the test risk over
-- the certify stage's random calibration/test re-splits of val ∪ test, its standard error and the number of
-- re-splits (metrics resplit_risk_*). The one stored source of these verdicts (cr2.report.validity). Parameter: $run_id.
SELECT method, lam, alpha,
       max(value) FILTER (WHERE metric = 'resplit_risk_mean') AS risk_mean,
       max(value) FILTER (WHERE metric = 'resplit_risk_se')   AS risk_se,
       max(value) FILTER (WHERE metric = 'resplit_risk_n')    AS n_resplits
FROM metrics
WHERE run_id = $run_id AND benchmark = 'all' AND contains(method, '@')
  AND metric IN ('resplit_risk_mean', 'resplit_risk_se', 'resplit_risk_n')
GROUP BY ALL
ORDER BY method, alpha, lam
