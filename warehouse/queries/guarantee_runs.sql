-- The validity runs of a warehouse (`cr2 guarantees`), newest first: re-splits, calibration size, labels.
SELECT run_id, any_value(source) AS source, any_value(label_source) AS label_source,
       max(n_resplits) AS n_resplits, max(n_calib) AS n_calib, max(created_at) AS created_at
FROM guarantees
GROUP BY run_id
ORDER BY max(created_at) DESC, run_id
