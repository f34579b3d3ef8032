-- Embedded queries under an encoder. Parameter: encoder.
SELECT count(*) FROM embeddings e JOIN queries q USING (query_id) WHERE e.encoder = ?
