-- Every query id, in order.
SELECT query_id FROM queries ORDER BY query_id
