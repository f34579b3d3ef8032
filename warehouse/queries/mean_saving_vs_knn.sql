-- Every learned method's mean fixed-accuracy saving vs KNN over the validation target grid, with its paired
-- bootstrap interval, the Holm p over its stored family and the test's stored word (v_mean_saving_ci).
SELECT method, display, n_targets, mean_saving_vs_knn_pct, saving_lower, saving_upper, n_resamples, family_size,
       p_holm, verdict
FROM v_mean_saving_ci
WHERE run_id = $run_id
ORDER BY method
