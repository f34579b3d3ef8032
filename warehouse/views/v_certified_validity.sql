-- Validity over re-splits of every certified router (`cr2 guarantees`, `cr2 results`, the report, docs/results.md):
-- per evaluation run, certified method `<router>@<rule>`, λ and α, the Monte-Carlo mean of the test risk over the
-- certify stage's random calibration/test re-splits of val ∪ test, its standard error and the number of re-splits
-- (metrics resplit_risk_*), and the exact expectation those re-splits estimate (metric resplit_exact_mean,
-- cr2.crc.expected_resplit_risk; NULL for a run stored before it was). The one stored source of these verdicts:
-- cr2.report.validity applies the one-sided test per λ and Holm over the λ cells of each (method, α), and the
-- two-sided test of each mean against its exact expectation (cr2.evaluation.validity; docs/guarantees.md). Where the
-- screening re-splits flag a (method, α) ("violation detected"), the certify stage re-checks it on an independent
-- stream with more re-splits (metrics resplit_confirm_*: confirm_mean, confirm_se, confirm_n), and that verdict is
-- the one reported.
SELECT run_id, method, lam, alpha,
       max(value) FILTER (WHERE metric = 'resplit_risk_mean') AS risk_mean,
       max(value) FILTER (WHERE metric = 'resplit_risk_se')   AS risk_se,
       max(value) FILTER (WHERE metric = 'resplit_risk_n')    AS n_resplits,
       max(value) FILTER (WHERE metric = 'resplit_exact_mean') AS exact_mean,
       max(value) FILTER (WHERE metric = 'resplit_confirm_risk_mean') AS confirm_mean,
       max(value) FILTER (WHERE metric = 'resplit_confirm_risk_se')   AS confirm_se,
       max(value) FILTER (WHERE metric = 'resplit_confirm_risk_n')    AS confirm_n
FROM metrics
WHERE benchmark = 'all' AND contains(method, '@')
  AND metric IN ('resplit_risk_mean', 'resplit_risk_se', 'resplit_risk_n', 'resplit_exact_mean',
                 'resplit_confirm_risk_mean', 'resplit_confirm_risk_se', 'resplit_confirm_risk_n')
GROUP BY run_id, method, lam, alpha
