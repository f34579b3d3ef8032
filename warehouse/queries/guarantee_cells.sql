-- Every bounded cell of one validity run (`cr2 guarantees`) — per rule, check, λ, α, group and target the
-- Monte-Carlo estimate over re-splits with its SE, its bound and the re-splits it counts, and the stage and seed of
-- the stream that drew them (screening; confirmatory: a flagged family's re-check) — so `cr2 guarantees`, the
-- report and docs/results.md apply the one validity verdict (cr2.evaluation.validity) to the cells. Parameter: $run_id.
SELECT rule, check_name, metric, lam, alpha, "group", target, delta, value, se, bound, n_resplits, n_calib,
       coalesce(stage, 'screening') AS stage, seed
FROM guarantees
WHERE run_id = $run_id AND check_name <> 'price' AND bound IS NOT NULL
ORDER BY rule, check_name, alpha, target, stage DESC, lam, "group"
