-- Label sources in the warehouse: rows, models, queries, accuracy and the backends that produced them
-- (`cr2 labels list`).
SELECT l.source, count(*) AS rows, count(DISTINCT l.model_id) AS models,
       count(DISTINCT l.query_id) AS queries, avg(l.correct::INT) AS accuracy,
       string_agg(DISTINCT r.backend, ',') AS backend
FROM labels l
LEFT JOIN label_runs r USING (run_id)
GROUP BY l.source
ORDER BY l.source
