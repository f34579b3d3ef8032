-- Label sources in the warehouse with their row counts.
SELECT source, count(*) AS n FROM labels GROUP BY source ORDER BY source
