-- What the label simulator reads of every query.
SELECT query_id, benchmark, subset, question, choices FROM queries ORDER BY query_id
