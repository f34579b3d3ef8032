-- Queries a labeling run has already labelled. Parameter: run_id.
SELECT query_id FROM labels WHERE run_id = ?
