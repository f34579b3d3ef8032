-- The states of a distribution with each query's benchmark, prompt tokens and split. Parameters: seed, dist_id.
SELECT s.query_id, s.draw, s.rate_ul_bps, s.rate_dl_bps, q.benchmark, q.prompt_tokens, sp.split
FROM states s JOIN queries q USING (query_id)
LEFT JOIN splits sp ON sp.query_id = s.query_id AND sp.seed = ?
WHERE s.dist_id = ? ORDER BY s.query_id, s.draw
