-- The queries of the selected benchmarks with what a labeling task needs. Parameter: benchmark list.
SELECT query_id, benchmark, subset, question, choices, target, tests, test_setup FROM queries WHERE benchmark IN (SELECT unnest(?::VARCHAR[])) ORDER BY query_id
