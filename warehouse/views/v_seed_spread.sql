-- Seed variability (cr2 study seeds): for each study and headline statistic (a metric at an operating
-- point, a saving vs KNN at a target, the mean saving), its spread over the seeds that re-ran split + training
-- (teacher, gate, learned baselines) + calibration + evaluation — mean, sd, min, max — beside the bootstrap
-- interval of the base seed (the config's own seed, run in this warehouse): test-query noise vs training noise.
WITH base AS (
    SELECT r.* FROM seed_results r JOIN seed_runs s USING (study_id, seed) WHERE s.home = '.'
)
SELECT r.study_id,
       r.method, r.lam, r.alpha, r.benchmark, r.metric, r.target,
       count(r.value)      AS n_seeds,
       avg(r.value)        AS seed_mean,
       stddev_samp(r.value) AS seed_sd,
       min(r.value)        AS seed_min,
       max(r.value)        AS seed_max,
       any_value(b.value)  AS base_value,
       any_value(b.lower)  AS base_lower,
       any_value(b.upper)  AS base_upper
FROM seed_results r
LEFT JOIN base b ON b.study_id = r.study_id AND b.method = r.method AND b.lam IS NOT DISTINCT FROM r.lam
                AND b.alpha IS NOT DISTINCT FROM r.alpha AND b.benchmark = r.benchmark AND b.metric = r.metric
                AND b.target IS NOT DISTINCT FROM r.target
GROUP BY ALL
