-- Each learned method's mean fixed-accuracy saving vs KNN over the target grid fixed from the validation split
-- (n_targets targets; a target a frontier misses costs the Always-model fallback), with its paired bootstrap
-- interval, its p from the same resamples, and the test's one word as stored with it: `verdict` from the Holm p over
-- its family (`family`, `family_size`: every learned router's mean saving of the run, cr2.evaluation.families) —
-- 'cheaper' / 'dearer' only where the interval excludes 0 and p_holm < 0.05, otherwise 'no difference detected'.
-- `verdict_uncorrected` is the interval's own word, never a conclusion. CR² at the run's comparison α. Tagged with
-- the label source.
SELECT i.run_id,
       r.label_source,
       r.label_source LIKE 'simulated%' AS labels_simulated,
       i.method,
       m.kind,
       m.display,
       i.n_targets,
       i.estimate AS mean_saving_vs_knn_pct,
       i.lower    AS saving_lower,
       i.upper    AS saving_upper,
       i.level,
       i.n_resamples,
       i.p_value,
       i.alpha,
       i.family,
       i.family_size,
       i.p_holm,
       i.verdict,
       saving_verdict(i.lower, i.upper) AS verdict_uncorrected
FROM intervals i
JOIN methods m USING (run_id, method)
JOIN eval_runs r USING (run_id)
WHERE i.metric = 'mean_saving_vs_knn_pct'
