-- CR² on the test split at one α, pooled over benchmarks, every λ of the run (`cr2 run`'s CR² table).
SELECT *
FROM operating_points
WHERE run_id = $run_id AND method = 'cr2' AND benchmark = 'all' AND abs(alpha - $alpha) < 1e-12
ORDER BY lam
