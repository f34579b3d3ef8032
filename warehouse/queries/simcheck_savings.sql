-- The report's fixed-accuracy table: each learned router's saving vs KNN (%) at the targets both label sets reach.
SELECT source, model AS router, target, round(measured, 2) AS measured_pct, round(mean, 2) AS simulated_mean_pct,
       round(q05, 2) AS q05, round(q95, 2) AS q95, n_seeds, meets_target AS same_sign
FROM v_simcheck
WHERE run_id = $run_id AND statistic = 'saving_vs_knn_pct'
ORDER BY source DESC, router, target
