-- Queries per benchmark that `cr2 ingest -c CONFIG` wrote.
SELECT benchmark, count(*) AS queries FROM queries GROUP BY benchmark ORDER BY benchmark
