-- Each learned method's mean fixed-accuracy saving vs KNN over the targets both reach (v_fixed_accuracy's
-- targets 0.50 … 0.99), with its paired bootstrap interval and the verdict: 'cheaper' / 'dearer'
-- only where the 95 % interval excludes 0, otherwise 'no difference detected'. Tagged with the label source.
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
       saving_verdict(i.lower, i.upper) AS verdict
FROM intervals i
JOIN methods m USING (run_id, method)
JOIN eval_runs r USING (run_id)
WHERE i.metric = 'mean_saving_vs_knn_pct'
