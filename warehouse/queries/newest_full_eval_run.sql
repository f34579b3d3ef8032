-- The newest evaluation run (of $label_source when not NULL), full evaluations first: a run that evaluated KNN,
-- the reference every comparison needs, ranks before a re-calibration's CR²-only before/after runs.
-- Columns: run_id, is_full (true when the run has KNN metrics).
SELECT r.run_id,
       EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = r.run_id AND m.method = 'knn') AS is_full
FROM eval_runs r
WHERE CAST($label_source AS VARCHAR) IS NULL OR r.label_source = $label_source
ORDER BY is_full DESC, r.created_at DESC
LIMIT 1
