-- Each uncalibrated method's test accuracy and cost at the given λ values, pooled over benchmarks
-- (`cr2 run`'s baselines table).
SELECT method, lam, accuracy, cost
FROM operating_points
WHERE run_id = $run_id AND benchmark = 'all' AND alpha IS NULL AND list_contains($lams, lam)
