-- Whether a labeling run is recorded. Parameter: run_id.
SELECT count(*) FROM label_runs WHERE run_id = ?
