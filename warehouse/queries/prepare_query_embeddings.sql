-- Every query's embedding under one encoder, in query order. Parameter: encoder.
SELECT query_id, vector FROM embeddings WHERE encoder = ? ORDER BY query_id
