-- Measured vs simulated label statistics of one sim-to-real run that have a tolerance (`cr2 simcheck`; v_simcheck).
SELECT source, statistic, model, other, measured, mean, q05, q95, tolerance, meets_target
FROM v_simcheck
WHERE run_id = $run_id AND tolerance IS NOT NULL
ORDER BY source DESC, statistic, model, other
