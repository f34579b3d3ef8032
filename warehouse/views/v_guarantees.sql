-- Guarantee validity (docs/guarantees.md): does each calibration rule keep its promise over random calibration/test
-- re-splits? One row per validity run, rule, check, α and group: the worst cell over λ (value vs bound,
-- with its Monte-Carlo SE) and whether every cell holds within 3 SE. crc: mean test risk ≤ α per λ;
-- ltt: share of re-splits with ANY λ over α ≤ δ; mondrian: mean risk ≤ α within each group;
-- target: share of re-splits whose chosen point misses the target ≤ δ. Rows without a bound are context
-- (e.g. crc's share of re-splits with some λ over α: CRC never promised that).
SELECT run_id, source, label_source, check_name, rule, metric, alpha, "group", delta, target,
       count(*)                                              AS n_cells,
       max(value)                                            AS worst_value,
       arg_max(se, (value, se))                                    AS se_at_worst,
       max(bound)                                            AS bound,
       max((value - bound) / nullif(se, 0))                  AS worst_z,
       CASE WHEN max(bound) IS NULL THEN NULL
            ELSE bool_and(value <= bound + 3 * coalesce(se, 0)) END AS holds,
       max(n_resplits)                                       AS n_resplits,
       max(n_calib)                                          AS n_calib,
       max(created_at)                                       AS created_at
FROM guarantees
WHERE check_name <> 'price'
GROUP BY run_id, source, label_source, check_name, rule, metric, alpha, "group", delta, target
