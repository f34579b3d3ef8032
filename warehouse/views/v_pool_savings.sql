-- The pool sweep (docs/results.md "CR² across measured pools"): per pool, each learned method's and the
-- full-information reference's mean fixed-accuracy saving (%) vs KNN and vs the best single model, averaged over
-- the n_targets targets of the pool run's validation grid (a target a frontier misses costs the cheapest Always-model
-- that reaches it), with its 95 % paired-bootstrap interval over the test queries (training and calibration held
-- fixed), its p from the same resamples, and the test's one word as stored with it: `verdict` from the Holm p over its
-- family within the pool (`family`, `family_size`: every learned method's mean saving vs that reference,
-- cr2.evaluation.families), 'not reached' where undefined; `verdict_uncorrected` is the interval's own word, never a
-- conclusion. The full-information reference is context: no family, no word. n_resamples: all of them.
SELECT r.study_id, r.pool, p.label_source, p.label_source LIKE 'simulated%' AS labels_simulated, p.reference AS m_ref,
       p.cost_ratio_realised, p.cost_ratio_est, p.n_test, p.n_evaluable,
       r.subject AS method, r.other AS reference, r.estimate AS mean_saving_pct, r.lower AS lower_pct,
       r.upper AS upper_pct, r.n AS n_targets, r.n_resamples, r.p_value, r.family, r.family_size, r.p_holm,
       CASE WHEN r.estimate IS NULL OR isnan(r.estimate) THEN 'not reached' ELSE r.verdict END AS verdict,
       CASE WHEN r.estimate IS NULL OR isnan(r.estimate) THEN 'not reached'
            ELSE coalesce(saving_verdict(r.lower, r.upper), 'not reached') END AS verdict_uncorrected
FROM pool_results r
JOIN pool_runs p USING (study_id, pool)
WHERE r.metric = 'mean_saving_pct'
