-- Every statistic of one sim-to-real run (view v_simcheck): measured beside each simulated source's mean, sd and
-- 5–95 % band over simulator seeds, and the sim-to-real tolerance where one is set. Parameter: run_id.
SELECT source, section, statistic, model, other, lam, target, n_seeds, mean, sd, q05, q95, measured, tolerance
FROM v_simcheck
WHERE run_id = $run_id
ORDER BY source, section, statistic, model, other, lam, target
