-- Paper Fig. local_selection: the fraction of solvable test queries answered on the device, per method
-- and λ (CR² at every α; the full-information reference; the one-shot baselines).
SELECT run_id, label_source, method, lam, alpha, local_rate
FROM operating_points
JOIN methods m USING (run_id, method)
WHERE benchmark = 'all' AND m.kind <> 'cr2-resplit'
