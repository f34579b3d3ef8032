-- The validity runs of a warehouse (`cr2 guarantees`), newest first: re-splits, calibration size, labels, the seed of
-- the screening stream (`--seed` reproduces the run) and, where a family was flagged, the confirmatory re-check's
-- seed and re-splits (NULL: nothing was re-checked). A row stored before schema 9 has no stage: it is a screening row.
SELECT run_id, any_value(source) AS source, any_value(label_source) AS label_source,
       max(n_resplits) FILTER (WHERE coalesce(stage, 'screening') = 'screening') AS n_resplits,
       max(n_calib) AS n_calib, max(created_at) AS created_at,
       any_value(seed) FILTER (WHERE coalesce(stage, 'screening') = 'screening') AS seed,
       any_value(seed) FILTER (WHERE stage = 'confirmatory') AS confirm_seed,
       max(n_resplits) FILTER (WHERE stage = 'confirmatory') AS confirm_n_resplits
FROM guarantees
GROUP BY run_id
ORDER BY max(created_at) DESC, run_id
