-- CR² on test under the new states: the old thresholds (run $before) vs the re-calibrated ones (run $after)
-- at α = $alpha, one row per λ, pooled over benchmarks (cr2 recalibrate's before/after table).
SELECT b.lam, b.alpha,
       b.risk AS risk_before, a.risk AS risk_after,
       b.local_rate AS local_rate_before, a.local_rate AS local_rate_after,
       b.accuracy AS accuracy_before, a.accuracy AS accuracy_after,
       b.cost AS cost_before, a.cost AS cost_after
FROM operating_points b
JOIN operating_points a ON a.method = b.method AND a.benchmark = b.benchmark AND a.lam = b.lam AND a.alpha = b.alpha
WHERE b.run_id = $before AND a.run_id = $after AND b.method = 'cr2' AND b.benchmark = 'all'
  AND abs(b.alpha - $alpha) < 1e-12
ORDER BY b.lam
