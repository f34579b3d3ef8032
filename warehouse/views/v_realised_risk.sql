-- What CR²'s α bounds and what users feel (docs/guarantees.md, docs/results.md). For CR² under the
-- deployed rule (method cr2, `rule` = its thresholds' rule) and under every compared rule (methods cr2-<rule>:
-- ltt, crc-oracle, crc-avoidable, ltt-oracle, ltt-avoidable, calibrated on the val split), at each (λ, α): the
-- teacher-referenced risk (teacher disagreement, the paper's), the realised risks on the real test labels —
-- oracle disagreement and avoidable error — with local accuracy, local rate, cost and accuracy. Risks are over
-- every test row (the population the guarantees are stated for); local rate, accuracy and cost over the
-- solvable rows (paper §VII-A). labels_simulated: the "real" labels of a simulated scenario are simulated too.
SELECT o.run_id, o.label_source, o.labels_simulated, o.method,
       CASE WHEN o.method = 'cr2' THEN (SELECT any_value(t.rule) FROM eval_runs r JOIN thresholds t
                                         ON t.version = r.threshold_version WHERE r.run_id = o.run_id)
            ELSE substr(o.method, 5) END AS rule,
       o.lam, o.alpha,
       o.risk_all           AS teacher_risk,
       o.oracle_risk_all    AS oracle_risk,
       o.avoidable_risk_all AS avoidable_risk,
       o.local_accuracy, o.local_rate, o.cost, o.accuracy, o.n_risk
FROM operating_points o
JOIN methods m USING (run_id, method)
WHERE o.benchmark = 'all' AND (m.kind = 'cr2' OR m.kind = 'cr2-risk-rule')
