-- Per method at the default α (α NULL for methods without calibration): the largest local rate and the
-- smallest mean cost over the λ sweep, and the accuracy range it spans.
SELECT method, max(local_rate) AS max_local_rate, min(cost) AS min_cost, max(cost) AS max_cost,
       min(accuracy) AS min_accuracy, max(accuracy) AS max_accuracy
FROM operating_points
WHERE run_id = $run_id AND benchmark = 'all' AND (alpha IS NULL OR abs(alpha - $alpha) < 1e-12)
  AND method IN (SELECT method FROM methods WHERE run_id = $run_id AND kind IN ('cr2', 'reference', 'baseline', 'baseline-variant'))
GROUP BY method ORDER BY method
