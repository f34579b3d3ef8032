-- Paper Fig. dumbbell_cost_saving: at each target accuracy (0.50 … 0.99 in steps of 0.01), the minimum
-- normalised cost at which CR² and each learned router reach it, two ways: `cost` on the method's monotone
-- accuracy–cost frontier with linear interpolation between consecutive frontier points (the headline: a
-- gap in one method's λ sweep cannot make a saving), and `cost_grid` at its best operating point with
-- accuracy ≥ target (no interpolation). Savings versus the reference router (catalogue `reference`: KNN)
-- at the same target, in %, both ways. A target above a method's best accuracy has no row. Baseline
-- variants (kind baseline-variant: inputs the others do not get, e.g. LLMRank with the benchmark id) are
-- listed under their own name and kind, never as peers. A method swept over several α (CR²) is read at the
-- run's one comparison α (eval_runs.default_alpha): an envelope over α would mix guarantees, so a run stored without
-- its α (before schema 8) has no row for such a method.
WITH pts AS (
    SELECT o.run_id, o.method, m.kind, m.reference, o.accuracy, o.cost FROM operating_points o
    JOIN methods m USING (run_id, method)
    JOIN eval_runs r USING (run_id)
    WHERE o.benchmark = 'all' AND (m.kind = 'cr2' OR (m.kind IN ('baseline', 'baseline-variant') AND m.learned))
      AND (o.alpha IS NULL OR abs(o.alpha - r.default_alpha) < 1e-12)
),
frontier AS (  -- the points no cheaper-or-equal point of the same method matches in accuracy
    SELECT p.* FROM pts p
    WHERE NOT EXISTS (
        SELECT 1 FROM pts q
        WHERE q.run_id = p.run_id AND q.method = p.method AND q.cost <= p.cost AND q.accuracy >= p.accuracy
          AND (q.cost < p.cost OR q.accuracy > p.accuracy))
),
segments AS (  -- consecutive frontier points (c1, a1) → (c2, a2), ascending cost (and accuracy)
    SELECT run_id, method, kind, reference, cost AS c2, accuracy AS a2,
           lag(cost) OVER w AS c1, lag(accuracy) OVER w AS a1
    FROM frontier
    WINDOW w AS (PARTITION BY run_id, method ORDER BY cost, accuracy)
),
targets AS (SELECT target FROM target_grid()),
interpolated AS (
    SELECT s.run_id, s.method, s.kind, s.reference, t.target,
           min(CASE WHEN s.a1 IS NULL OR s.a1 >= t.target - 1e-12 THEN s.c2
                    ELSE s.c1 + (t.target - s.a1) * (s.c2 - s.c1) / (s.a2 - s.a1) END) AS cost
    FROM segments s JOIN targets t ON s.a2 >= t.target - 1e-12
    GROUP BY ALL
),
grid AS (
    SELECT p.run_id, p.method, t.target, min(p.cost) AS cost_grid
    FROM pts p JOIN targets t ON p.accuracy >= t.target - 1e-12
    GROUP BY ALL
)
SELECT i.run_id, i.method, i.kind, i.target, i.cost, g.cost_grid,
       k.cost AS knn_cost, kg.cost_grid AS knn_cost_grid,
       100.0 * (1.0 - i.cost / k.cost) AS saving_vs_knn_pct,
       100.0 * (1.0 - g.cost_grid / kg.cost_grid) AS saving_vs_knn_grid_pct
FROM interpolated i
JOIN grid g ON g.run_id = i.run_id AND g.method = i.method AND g.target = i.target
JOIN interpolated k ON k.run_id = i.run_id AND k.target = i.target AND k.reference
JOIN grid kg ON kg.run_id = i.run_id AND kg.target = i.target AND kg.method = k.method
