-- operating_points with the paired bootstrap interval of every per-query metric beside it: for each
-- (run, method, λ, α, benchmark), accuracy / cost / local_rate / risk / risk_all and the realised risks
-- (oracle_risk, avoidable_risk, each also _all) with _lower and _upper (the
-- percentile interval at `level` over the test queries, one resample index shared by every method). Test-query
-- noise only: training, calibration and the split are held fixed (the seed study, v_seed_spread, varies them).
WITH ci AS (
    SELECT run_id, method, lam, alpha, benchmark,
           max(lower) FILTER (WHERE metric = 'accuracy')   AS accuracy_lower,
           max(upper) FILTER (WHERE metric = 'accuracy')   AS accuracy_upper,
           max(lower) FILTER (WHERE metric = 'cost')       AS cost_lower,
           max(upper) FILTER (WHERE metric = 'cost')       AS cost_upper,
           max(lower) FILTER (WHERE metric = 'local_rate') AS local_rate_lower,
           max(upper) FILTER (WHERE metric = 'local_rate') AS local_rate_upper,
           max(lower) FILTER (WHERE metric = 'risk')       AS risk_lower,
           max(upper) FILTER (WHERE metric = 'risk')       AS risk_upper,
           max(lower) FILTER (WHERE metric = 'risk_all')   AS risk_all_lower,
           max(upper) FILTER (WHERE metric = 'risk_all')   AS risk_all_upper,
           max(lower) FILTER (WHERE metric = 'oracle_risk')        AS oracle_risk_lower,
           max(upper) FILTER (WHERE metric = 'oracle_risk')        AS oracle_risk_upper,
           max(lower) FILTER (WHERE metric = 'oracle_risk_all')    AS oracle_risk_all_lower,
           max(upper) FILTER (WHERE metric = 'oracle_risk_all')    AS oracle_risk_all_upper,
           max(lower) FILTER (WHERE metric = 'avoidable_risk')     AS avoidable_risk_lower,
           max(upper) FILTER (WHERE metric = 'avoidable_risk')     AS avoidable_risk_upper,
           max(lower) FILTER (WHERE metric = 'avoidable_risk_all') AS avoidable_risk_all_lower,
           max(upper) FILTER (WHERE metric = 'avoidable_risk_all') AS avoidable_risk_all_upper,
           max(level)       AS level,
           max(n_resamples) AS n_resamples
    FROM intervals
    WHERE target IS NULL AND lam IS NOT NULL
    GROUP BY ALL
)
SELECT o.*,
       ci.* EXCLUDE (run_id, method, lam, alpha, benchmark)
FROM operating_points o
LEFT JOIN ci ON ci.run_id = o.run_id AND ci.method = o.method AND ci.lam = o.lam
            AND ci.alpha IS NOT DISTINCT FROM o.alpha AND ci.benchmark = o.benchmark
