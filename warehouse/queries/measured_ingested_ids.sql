-- The ingested query ids of one benchmark. Parameter: benchmark.
SELECT query_id FROM queries WHERE benchmark = ?
