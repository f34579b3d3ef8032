-- Per compared method of one evaluation run: the range of fixed-accuracy targets (0.50 … 0.99) it reaches
-- together with the reference router (v_fixed_accuracy has a row only there) — `cr2 results` picks its
-- default targets from it.
SELECT method, min(target) AS min_target, max(target) AS max_target, count(*) AS n_targets
FROM v_fixed_accuracy
WHERE run_id = $run_id
GROUP BY method
ORDER BY method
