-- What each guarantee costs beside plain CRC, per validity run — mean test local rate, mean
-- normalised cost and accuracy (with Monte-Carlo SEs) of ltt and Mondrian at the same (λ, α) as crc, and of
-- the target mode's chosen point beside the CRC point an oracle would pick on the test set itself. Also the
-- mean test value of each risk under each rule — teacher disagreement (the paper's), oracle disagreement on real
-- labels and avoidable error — so the realised risks of crc sit beside those of crc-oracle / crc-avoidable / ltt-….
WITH p AS (
    SELECT run_id, source, label_source, rule, lam, alpha, delta, target,
           max(value) FILTER (WHERE metric = 'local_rate') AS local_rate,
           max(se)    FILTER (WHERE metric = 'local_rate') AS local_rate_se,
           max(value) FILTER (WHERE metric = 'mean_cost')  AS mean_cost,
           max(se)    FILTER (WHERE metric = 'mean_cost')  AS mean_cost_se,
           max(value) FILTER (WHERE metric = 'accuracy')   AS accuracy,
           max(se)    FILTER (WHERE metric = 'accuracy')   AS accuracy_se,
           max(value) FILTER (WHERE metric = 'teacher_risk')   AS teacher_risk,
           max(value) FILTER (WHERE metric = 'oracle_risk')    AS oracle_risk,
           max(se)    FILTER (WHERE metric = 'oracle_risk')    AS oracle_risk_se,
           max(value) FILTER (WHERE metric = 'avoidable_risk') AS avoidable_risk,
           max(se)    FILTER (WHERE metric = 'avoidable_risk') AS avoidable_risk_se,
           max(n_resplits) AS n_resplits
    FROM guarantees WHERE check_name = 'price' AND coalesce(stage, 'screening') = 'screening'
    GROUP BY run_id, source, label_source, rule, lam, alpha, delta, target
)
SELECT p.*,
       c.local_rate AS crc_local_rate, c.mean_cost AS crc_mean_cost, c.accuracy AS crc_accuracy,
       p.local_rate - c.local_rate AS local_rate_vs_crc, p.mean_cost - c.mean_cost AS mean_cost_vs_crc
FROM p
LEFT JOIN p c ON c.run_id = p.run_id
             AND ((p.target IS NULL AND c.rule = 'crc' AND c.lam = p.lam AND c.alpha = p.alpha)
               OR (p.target IS NOT NULL AND c.target = p.target
                   AND c.rule = p.rule || '-crc-oracle'))
