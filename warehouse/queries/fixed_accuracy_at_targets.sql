-- Fixed-accuracy cost of every compared method at the given targets, on its interpolated monotone frontier
-- and at its best grid point, with the saving versus the reference router, its paired bootstrap interval and
-- the test's stored word with the Holm p over its stored family (v_fixed_accuracy_ci).
SELECT method, kind, target, cost, cost_grid, saving_vs_knn_pct, saving_vs_knn_grid_pct, saving_lower, saving_upper,
       n_resamples, family_size, p_holm, verdict
FROM v_fixed_accuracy_ci
WHERE run_id = $run_id AND list_contains($targets, round(target, 2))
ORDER BY target, method
