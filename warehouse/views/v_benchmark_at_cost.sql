-- Paper Table per_benchmark_by_cost: per method, the operating point whose pooled normalised cost is
-- nearest to each cost target (0.35, 0.45, 0.55) — CR² over all its (λ, α) — and its accuracy per
-- benchmark and pooled. A target outside a method's cost range is unreachable (reachable = false: "–").
WITH pooled AS (
    SELECT run_id, method, lam, alpha, cost FROM operating_points
    JOIN methods m USING (run_id, method)
    WHERE benchmark = 'all' AND (m.kind = 'cr2' OR (m.kind = 'baseline' AND m.learned))
),
ranges AS (SELECT run_id, method, min(cost) AS lo, max(cost) AS hi FROM pooled GROUP BY ALL),
targets AS (SELECT unnest([0.35, 0.45, 0.55]) AS target),
nearest AS (
    SELECT p.run_id, p.method, t.target,
           arg_min({'lam': p.lam, 'alpha': p.alpha}, (abs(p.cost - t.target), p.lam, p.alpha)) AS point
    FROM pooled p CROSS JOIN targets t GROUP BY ALL
)
SELECT n.run_id, n.method, n.target, n.point.lam AS lam, n.point.alpha AS alpha,
       (n.target BETWEEN r.lo AND r.hi) AS reachable,
       o.benchmark, o.accuracy, o.cost
FROM nearest n
JOIN ranges r USING (run_id, method)
JOIN operating_points o ON o.run_id = n.run_id AND o.method = n.method AND o.lam = n.point.lam
                       AND o.alpha IS NOT DISTINCT FROM n.point.alpha
