-- Output tokens of every (query, model) of a label source. Parameter: source.
SELECT query_id, model_id, output_tokens FROM labels WHERE source = ?
