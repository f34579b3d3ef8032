-- Per label source, state distribution, split seed, benchmark and model: how many queries, how often the model is
-- right, and its mean normalised cost c_m(x, ξ) (c_ref ≡ 1). `cr2 run` prints this; simulated label
-- sources (simulated-*) are flagged in `labels_simulated` so no one reads them as measured.
SELECT
    c.label_source,
    c.label_source LIKE 'simulated%'          AS labels_simulated,
    c.dist_id,
    c.split_seed,
    q.benchmark,
    c.model_id,
    m.position                                AS model_position,
    count(DISTINCT c.query_id)                AS queries,
    avg(l.correct::INTEGER)                   AS accuracy,
    avg(c.cost_norm)                          AS mean_cost_norm,
    avg(c.latency_s)                          AS mean_latency_s,
    avg(c.energy_j)                           AS mean_energy_j
FROM costs c
JOIN labels l  ON l.source = c.label_source AND l.query_id = c.query_id AND l.model_id = c.model_id
JOIN queries q ON q.query_id = c.query_id
JOIN models m  ON m.model_id = c.model_id
GROUP BY ALL
