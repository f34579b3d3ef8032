-- Guarantee validity (docs/guarantees.md): each promise of a `cr2 guarantees` run over random calibration/test
-- re-splits, summarised per run, rule, check, α, group and target: how many cells (λ values) it has, the largest
-- Monte-Carlo estimate with its SE and the bound. ltt: share of re-splits with ANY λ over α ≤ δ; mondrian: mean risk
-- ≤ α within each group; target: share of re-splits whose chosen point misses the target ≤ δ. Rows without a bound
-- are context (e.g. crc's share of re-splits with some λ over α: CRC never promised that). The verdict ("no
-- violation detected" / "violation detected") is not a column: it is a one-sided test per cell with Holm over the
-- promise's cells (cr2.evaluation.validity), which `cr2 guarantees` and the report apply to the cells themselves.
-- stage: 'screening' (the run's re-splits) or 'confirmatory' (a flagged family re-checked on its own stream, seed).
SELECT run_id, source, label_source, coalesce(stage, 'screening') AS stage, any_value(seed) AS seed,
       check_name, rule, metric, alpha, "group", delta, target,
       count(*)                                              AS n_cells,
       max(value)                                            AS worst_value,
       arg_max(se, (value, se))                              AS se_at_worst,
       max(bound)                                            AS bound,
       max(n_resplits)                                       AS n_resplits,
       max(n_calib)                                          AS n_calib,
       max(created_at)                                       AS created_at
FROM guarantees
WHERE check_name <> 'price'
GROUP BY run_id, source, label_source, coalesce(stage, 'screening'), check_name, rule, metric, alpha, "group", delta,
         target
