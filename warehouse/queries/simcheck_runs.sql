-- Every sim-to-real run of the warehouse (`cr2 simcheck`: ids simcheck-…; `cr2 study simcheck`: simcheck-w-…),
-- newest first: questions, whether routers were fitted (routing rows present), whether a fresh v2 fit was recorded
-- (`cr2 simcheck` with simcheck.refit), and the pool (JSON: model id → measured name).
SELECT r.run_id, r.n_questions, r.pool, r.created_at,
       EXISTS (SELECT 1 FROM simcheck s WHERE s.run_id = r.run_id AND s.section = 'routing') AS has_routing,
       coalesce(json_extract(r.shape, '$.fresh_fit') IS NOT NULL
                AND json_type(json_extract(r.shape, '$.fresh_fit')) <> 'NULL', false) AS has_fresh_fit
FROM simcheck_runs r
ORDER BY r.created_at DESC, r.run_id
