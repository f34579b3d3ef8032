-- What the split assignment reads of every query.
SELECT query_id, benchmark, subset FROM queries ORDER BY query_id
