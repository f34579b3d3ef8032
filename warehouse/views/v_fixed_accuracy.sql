-- Paper Fig. dumbbell_cost_saving: at each target accuracy (0.50 … 0.99 in steps of 0.01), the minimum
-- normalised cost at which each learned router reaches it (its best operating point with accuracy ≥ target;
-- no interpolation between points), and the saving of each method versus KNN at the same target, in %.
WITH pts AS (
    SELECT run_id, method, m.reference, accuracy, cost FROM operating_points
    JOIN methods m USING (run_id, method)
    WHERE benchmark = 'all' AND (m.kind = 'cr2' OR (m.kind = 'baseline' AND m.learned))
),
targets AS (SELECT range / 100.0 AS target FROM range(50, 100)),
best AS (
    SELECT p.run_id, p.method, p.reference, t.target, min(p.cost) AS cost
    FROM pts p JOIN targets t ON p.accuracy >= t.target - 1e-12
    GROUP BY ALL
)
SELECT b.run_id, b.method, b.target, b.cost, k.cost AS knn_cost,
       100.0 * (1.0 - b.cost / k.cost) AS saving_vs_knn_pct
FROM best b
JOIN best k ON k.run_id = b.run_id AND k.target = b.target AND k.reference
