-- One row per (query, channel draw) of the routing view: split, embedding, per-model correctness and
-- normalised cost (realised, and the pre-execution estimate) in pool order. Parameters: $dist_id, $label_source, $seed, $encoder.
SELECT
    s.query_id,
    s.draw,
    q.benchmark,
    sp.split,
    s.distance_m,
    e.vector,
    list(l.correct   ORDER BY m.position) AS correct,
    list(c.cost_norm ORDER BY m.position) AS cost,
    list(c.cost_est_norm ORDER BY m.position) AS cost_est,
    list(m.model_id  ORDER BY m.position) AS model_ids
FROM states s
JOIN queries q     ON q.query_id = s.query_id
JOIN splits sp     ON sp.query_id = s.query_id AND sp.seed = $seed
JOIN embeddings e  ON e.query_id = s.query_id AND e.encoder = $encoder
JOIN costs c       ON c.dist_id = s.dist_id AND c.query_id = s.query_id AND c.draw = s.draw
                  AND c.label_source = $label_source
JOIN labels l      ON l.source = $label_source AND l.query_id = s.query_id AND l.model_id = c.model_id
JOIN models m      ON m.model_id = c.model_id
WHERE s.dist_id = $dist_id
GROUP BY s.query_id, s.draw, q.benchmark, sp.split, s.distance_m, e.vector
ORDER BY s.query_id, s.draw
