-- The report's CR² table: test false-acceptance risk and local rate per λ, measured vs simulated.
SELECT source, lam, statistic, round(measured, 4) AS measured, round(mean, 4) AS simulated_mean,
       round(q05, 4) AS q05, round(q95, 4) AS q95
FROM v_simcheck
WHERE run_id = $run_id AND model = 'cr2' AND statistic IN ('risk', 'local_rate', 'accuracy', 'cost')
ORDER BY source DESC, statistic, lam
