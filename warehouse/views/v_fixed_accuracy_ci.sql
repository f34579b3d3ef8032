-- v_fixed_accuracy with the paired bootstrap interval of each learned method's saving vs KNN at each
-- target: saving_lower / saving_upper (percentile interval at `level`; per resample both frontiers are
-- recomputed on the same test queries) and the verdict the words may use — 'cheaper' only where the whole
-- interval is above 0, 'dearer' where it is below 0, otherwise 'no difference detected' — one interval's word,
-- uncorrected; a family of these is read with Holm over p_value (from the same resamples) (macro saving_verdict, the twin of cr2.evaluation.statistics.saving_verdict).
SELECT f.*,
       i.lower AS saving_lower,
       i.upper AS saving_upper,
       i.level,
       i.n_resamples,
       i.p_value,
       saving_verdict(i.lower, i.upper) AS verdict
FROM v_fixed_accuracy f
LEFT JOIN intervals i ON i.run_id = f.run_id AND i.method = f.method AND i.metric = 'saving_vs_knn_pct'
                     AND abs(i.target - f.target) < 1e-9
