-- The router study (cr2 study routers): per unit, every certified router's equal-risk mean saving against the
-- reference $other at the study's α (the pairwise question), with its interval, bootstrap p and resamples.
SELECT pool AS unit, subject, other, estimate, lower, upper, p_value, n_resamples
FROM pool_results
WHERE study_id = $study_id AND metric = 'equal-risk:pairwise' AND other = $other
ORDER BY subject, unit
