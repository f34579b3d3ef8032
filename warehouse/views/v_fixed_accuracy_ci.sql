-- v_fixed_accuracy with the paired bootstrap interval of each learned method's saving vs KNN at each
-- target: saving_lower / saving_upper (percentile interval at `level`; per resample both frontiers are
-- recomputed on the same test queries), its p from the same resamples, and the test's one word as stored with it:
-- `verdict` from the Holm p over its family (`family`, `family_size`: every learned router × target of the run,
-- cr2.evaluation.families) — 'cheaper' only where the interval is above 0 and p_holm < 0.05, 'dearer' where below,
-- otherwise 'no difference detected'. `verdict_uncorrected` is the interval's own word (macro saving_verdict), never
-- a conclusion. saving_vs_knn_pct is the stored statistic the interval is of: each side charged the lower of its
-- frontier cost and the cheapest Always-model reaching the target (cr2.evaluation.fixed_accuracy.FallbackCost.charge);
-- saving_vs_knn_frontier_pct is v_fixed_accuracy's frontier against frontier.
SELECT f.* REPLACE (coalesce(i.estimate, f.saving_vs_knn_pct) AS saving_vs_knn_pct),
       f.saving_vs_knn_pct AS saving_vs_knn_frontier_pct,
       i.lower AS saving_lower,
       i.upper AS saving_upper,
       i.level,
       i.n_resamples,
       i.p_value,
       i.family,
       i.family_size,
       i.p_holm,
       i.verdict,
       saving_verdict(i.lower, i.upper) AS verdict_uncorrected
FROM v_fixed_accuracy f
LEFT JOIN intervals i ON i.run_id = f.run_id AND i.method = f.method AND i.metric = 'saving_vs_knn_pct'
                     AND abs(i.target - f.target) < 1e-9
