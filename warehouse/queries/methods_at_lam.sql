-- Every evaluated method of one run at one λ (CR² and its variants at α = $alpha, the baselines without α),
-- pooled over benchmarks: the router comparison a Prefect artifact shows. Parameters: $run_id, $lam, $alpha.
SELECT method, lam, alpha, accuracy, cost, local_rate, risk
FROM operating_points
WHERE run_id = $run_id AND benchmark = 'all' AND abs(lam - $lam) < 1e-9
  AND (alpha IS NULL OR abs(alpha - $alpha) < 1e-12)
ORDER BY cost, method
