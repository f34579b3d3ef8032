-- Mark a resumed labeling run running again, with the current selection's total and done.
UPDATE label_runs SET status = 'running', finished_at = NULL, backend_args = ?, total = ?, done = ? WHERE run_id = ?
