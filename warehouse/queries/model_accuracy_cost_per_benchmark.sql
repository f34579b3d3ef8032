-- Per benchmark and model: queries, accuracy and mean normalised cost under one label source, state
-- distribution and split seed (`cr2 prepare` / `cr2 run`'s model table).
SELECT *
FROM model_summary
WHERE label_source = $label_source AND dist_id = $dist_id AND split_seed = $split_seed
ORDER BY benchmark, model_position
