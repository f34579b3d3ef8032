-- The paper's two-stage rule assumes the device model m0 is never dearer than an edge model: per state
-- distribution and label source, the share of (query, state) rows where it is, under the pre-execution
-- estimate ĉ (what routers decide with) and under the realised cost c (what is accounted), and the
-- output-length estimate L̂_out per (benchmark, model) the estimate uses (written by `cr2 prepare`).
SELECT
    split_part(key, ':', 2)                                                   AS dist_id,
    split_part(key, ':', 3)                                                   AS label_source,
    CAST(json_extract(value, '$.device_dearer_share.estimated') AS DOUBLE)  AS device_dearer_share_estimated,
    CAST(json_extract(value, '$.device_dearer_share.realised') AS DOUBLE)   AS device_dearer_share_realised,
    json_extract(value, '$.model_ids')                                        AS model_ids,
    json_extract(value, '$.output_token_estimates')                           AS output_token_estimates
FROM meta
WHERE key LIKE 'cost_scales:%'
