-- One row per (query, channel draw) of the routing view: split, embedding, per-model correctness and
-- normalised cost (realised, and the pre-execution estimate from the same split seed) in pool order. Parameters: $dist_id, $label_source, $seed, $encoder.
-- The per-model lists are aggregated before the embedding is joined: grouping by the 384-float vector made the
-- query ≈ 4× slower; rows, order and content are the same.
WITH per_draw AS (
    SELECT s.query_id, s.draw, s.distance_m,
           list(l.correct   ORDER BY m.position) AS correct,
           list(c.cost_norm ORDER BY m.position) AS cost,
           list(c.cost_est_norm ORDER BY m.position) AS cost_est,
           list(m.model_id  ORDER BY m.position) AS model_ids
    FROM states s
    JOIN costs c       ON c.dist_id = s.dist_id AND c.query_id = s.query_id AND c.draw = s.draw
                      AND c.label_source = $label_source AND c.split_seed = $seed
    JOIN labels l      ON l.source = $label_source AND l.query_id = s.query_id AND l.model_id = c.model_id
    JOIN models m      ON m.model_id = c.model_id
    WHERE s.dist_id = $dist_id
    GROUP BY s.query_id, s.draw, s.distance_m
)
SELECT d.query_id, d.draw, q.benchmark, sp.split, d.distance_m, e.vector, d.correct, d.cost, d.cost_est, d.model_ids
FROM per_draw d
JOIN queries q     ON q.query_id = d.query_id
JOIN splits sp     ON sp.query_id = d.query_id AND sp.seed = $seed
JOIN embeddings e  ON e.query_id = d.query_id AND e.encoder = $encoder
ORDER BY d.query_id, d.draw
