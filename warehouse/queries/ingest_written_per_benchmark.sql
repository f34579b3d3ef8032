-- Queries per benchmark as written (checked against the source's counts before commit).
SELECT benchmark, count(*) FROM queries GROUP BY benchmark
