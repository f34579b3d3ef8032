-- Per simulated source: at how many (router, target) points the fixed-accuracy saving vs KNN has the measured
-- sign (`cr2 simcheck`; v_simcheck).
SELECT source, count(*) AS n, sum(meets_target::INT) AS same_sign
FROM v_simcheck
WHERE run_id = $run_id AND statistic = 'saving_vs_knn_pct'
GROUP BY source
ORDER BY source DESC
