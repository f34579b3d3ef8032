-- Queries without an embedding under the encoder, or whose text changed since. Parameter: encoder.
SELECT q.query_id, q.question, q.choices, q.content_hash FROM queries q
LEFT JOIN embeddings e ON e.query_id = q.query_id AND e.encoder = ?
WHERE e.query_id IS NULL OR e.content_hash <> q.content_hash ORDER BY q.query_id
