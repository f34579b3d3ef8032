-- Per evaluated method and α of one run: the highest test accuracy over its λ sweep (pooled over benchmarks) — why a
-- fixed-accuracy table (`cr2 results --equal-risk`) has no cell for a side at a target: its frontier stops below it.
SELECT method, alpha, max(accuracy) AS max_accuracy
FROM operating_points
WHERE run_id = $run_id AND benchmark = 'all'
GROUP BY method, alpha
ORDER BY method, alpha
