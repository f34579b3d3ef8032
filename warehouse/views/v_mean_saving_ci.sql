-- Each learned method's mean fixed-accuracy saving vs KNN over the target grid fixed from the validation split
-- (n_targets targets; a target a frontier misses costs the Always-model fallback), with its paired bootstrap
-- interval, its p from the same resamples and the verdict of that one interval: 'cheaper' / 'dearer' only where
-- the 95 % interval excludes 0, otherwise 'no difference detected' (uncorrected: a family of these is read with
-- Holm over p_value). CR² at the run's comparison α. Tagged with the label source.
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
       saving_verdict(i.lower, i.upper) AS verdict
FROM intervals i
JOIN methods m USING (run_id, method)
JOIN eval_runs r USING (run_id)
WHERE i.metric = 'mean_saving_vs_knn_pct'
