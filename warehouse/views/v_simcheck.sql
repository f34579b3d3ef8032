-- Sim-to-real check (cr2 simcheck, docs/labels.md): on the same MMLU-Pro questions, every statistic of the
-- measured labels beside each simulated source's Monte-Carlo mean, sd and 5–95 % band over simulator seeds,
-- the difference, the sim-to-real tolerance where one is set (solvable share 0.02, pairwise correlation 0.05,
-- P(device right | largest wrong) 0.03, accuracy 0.005) and whether it is met (fixed-accuracy savings vs
-- KNN: same sign as measured). Filter by run_id (simcheck_runs) and source.
WITH sim AS (
    SELECT run_id, source, section, statistic, model, other, lam, target,
           count(*) AS n_seeds, avg(value) AS mean, stddev_samp(value) AS sd,
           quantile_cont(value, 0.05) AS q05, quantile_cont(value, 0.95) AS q95
    FROM simcheck WHERE source NOT IN ('measured', 'fit')
    GROUP BY ALL
),
meas AS (
    SELECT run_id, section, statistic, model, other, lam, target, value AS measured
    FROM simcheck WHERE source = 'measured'
),
joined AS (
    SELECT s.*, m.measured, s.mean - m.measured AS diff,
           CASE s.statistic WHEN 'solvable_share' THEN 0.02 WHEN 'correlation' THEN 0.05
                WHEN 'p_device_given_largest_wrong' THEN 0.03
                WHEN 'accuracy' THEN CASE WHEN s.section = 'structure' THEN 0.005 END END AS tolerance
    FROM sim s JOIN meas m
      ON m.run_id = s.run_id AND m.section = s.section AND m.statistic = s.statistic AND m.model = s.model
     AND m.other = s.other AND m.lam IS NOT DISTINCT FROM s.lam AND m.target IS NOT DISTINCT FROM s.target
)
SELECT *,
       CASE WHEN statistic = 'saving_vs_knn_pct' THEN sign(mean) = sign(measured)
            WHEN tolerance IS NOT NULL THEN abs(diff) <= tolerance END AS meets_target
FROM joined
