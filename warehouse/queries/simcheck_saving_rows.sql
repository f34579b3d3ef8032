-- Measured vs simulated saving vs KNN per router and target of sim-to-real run $run_id (cr2 study simcheck).
SELECT * FROM v_simcheck
WHERE run_id = $run_id AND statistic = 'saving_vs_knn_pct'
ORDER BY source, model, target
