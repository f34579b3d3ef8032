-- Correctness labels as numbers: `labels` with `correct` as 0/1 (INTEGER), so the obvious query works —
-- `SELECT model_id, avg(correct) AS accuracy FROM v_labels GROUP BY model_id` (avg of the BOOLEAN
-- `labels.correct` is not defined in DuckDB). One row per (label source, query, model).
SELECT l.source, l.query_id, q.benchmark, q.subset, l.model_id, l.correct::INTEGER AS correct, l.output_tokens, l.run_id
FROM labels l
LEFT JOIN queries q USING (query_id)
