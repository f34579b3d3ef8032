-- Per-subset (MMLU-Pro category, MMLU subject, …) accuracy and cost of each learned router at the operating
-- point nearest each cost target (0.35 / 0.45 / 0.55) — the same points as v_benchmark_at_cost — computed from
-- the stored per-query `decisions`: the chosen model's label (the run's label source) and mean normalised cost
-- over the run's channel states. Queries no model solves are left out, as in the metrics (evaluation.exclude_unsolvable).
WITH points AS (
    SELECT DISTINCT run_id, method, target, lam, alpha, reachable FROM v_benchmark_at_cost
),
solvable AS (
    SELECT l.source, l.query_id FROM labels l GROUP BY ALL HAVING bool_or(l.correct)
),
per_query AS (
    SELECT p.run_id, p.method, p.target, p.lam, p.alpha, p.reachable, q.benchmark, q.subset, d.query_id,
           l.correct::INT AS correct, avg(c.cost_norm) AS cost
    FROM points p
    JOIN eval_runs r USING (run_id)
    JOIN decisions d ON d.run_id = p.run_id AND d.method = p.method AND d.lam = p.lam
                    AND d.alpha IS NOT DISTINCT FROM p.alpha
    JOIN queries q ON q.query_id = d.query_id
    JOIN solvable s ON s.source = r.label_source AND s.query_id = d.query_id
    JOIN labels l ON l.source = r.label_source AND l.query_id = d.query_id AND l.model_id = d.chosen_model
    JOIN costs c ON c.dist_id = r.dist_id AND c.label_source = r.label_source AND c.query_id = d.query_id
                AND c.model_id = d.chosen_model AND c.split_seed = coalesce(r.split_seed, c.split_seed)
    GROUP BY ALL
)
SELECT run_id, method, target, lam, alpha, reachable, benchmark, subset,
       count(*) AS n, avg(correct) AS accuracy, avg(cost) AS cost
FROM per_query GROUP BY ALL
