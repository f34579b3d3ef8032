-- Accuracy–cost points per (source, router, λ), mean over simulator seeds (measured: one set).
SELECT source, model, lam,
       avg(value) FILTER (WHERE statistic = 'accuracy') AS accuracy,
       avg(value) FILTER (WHERE statistic = 'cost') AS cost
FROM simcheck
WHERE run_id = $run_id AND section = 'routing' AND statistic IN ('accuracy', 'cost')
GROUP BY ALL
ORDER BY source, model, lam
