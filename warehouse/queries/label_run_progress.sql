-- Add the newly labelled count of a chunk to a run's progress.
UPDATE label_runs SET done = done + ? WHERE run_id = ?
