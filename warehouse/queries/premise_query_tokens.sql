-- Per (query, model) of the pool: the prompt length L_in(x) and the recorded output length L_out,m(x)
-- (NULL where the label source recorded none), for the premise map's cost recomputation. Parameter: $label_source.
SELECT q.query_id, q.benchmark, q.prompt_tokens, l.model_id, l.output_tokens
FROM queries q
JOIN labels l ON l.query_id = q.query_id AND l.source = $label_source
ORDER BY q.query_id, l.model_id
