-- Measured vs simulated label structure and diagnostics of sim-to-real run $run_id (cr2 study simcheck).
SELECT * FROM v_simcheck
WHERE run_id = $run_id AND section IN ('structure', 'diagnostics')
ORDER BY source, section, statistic, model, other
