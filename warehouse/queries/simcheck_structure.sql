-- The report's label-structure table: measured vs each simulated source (mean, 5–95 % band over seeds).
SELECT statistic, model, other, source, round(measured, 4) AS measured, round(mean, 4) AS simulated_mean,
       round(sd, 4) AS sd, round(q05, 4) AS q05, round(q95, 4) AS q95, round(diff, 4) AS diff, tolerance, meets_target
FROM v_simcheck
WHERE run_id = $run_id AND section = 'structure'
ORDER BY source DESC, statistic, model, other
