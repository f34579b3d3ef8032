-- A fingerprint of the ingested queries (ids and content) for the measured-labels cache key.
SELECT coalesce(sum(hash(query_id, content_hash)), 0)::VARCHAR || ':' || count(*)::VARCHAR FROM queries
