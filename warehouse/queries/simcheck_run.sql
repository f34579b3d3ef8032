-- One simcheck_runs row. Parameter: run_id.
SELECT * FROM simcheck_runs WHERE run_id = ?
