-- Drop the encoder's stale embeddings of the queries about to be embedded (_new_ids).
DELETE FROM embeddings WHERE encoder = ? AND query_id IN (SELECT query_id FROM _new_ids)
