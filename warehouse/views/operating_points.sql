-- CR² and every other evaluated method at each (λ, α) and benchmark, one row per operating point with
-- its metrics side by side (accuracy, normalised cost, false-acceptance risk, local rate, n), tagged with
-- the run's label source so simulated results are never read as measured. accuracy, cost and local_rate
-- and risk are over the n solvable test queries (paper §VII-A); risk_all is over all n_risk test queries.
-- `risk` is teacher disagreement (accepted while the teacher prefers an edge model, eq. disagree_label);
-- beside it the realised risks on the real labels — oracle_risk (accepted while argmax_m y_m − λ·c_m is an edge
-- model) and avoidable_risk (accepted, device wrong, an edge model right), each also over all rows (_all) —
-- and local_accuracy (the device's accuracy on the queries it accepted).
SELECT
    m.run_id,
    r.label_source,
    r.label_source LIKE 'simulated%' AS labels_simulated,
    r.dist_id,
    r.decision_cost,
    m.method,
    m.lam,
    m.alpha,
    m.benchmark,
    max(m.value) FILTER (WHERE m.metric = 'accuracy')   AS accuracy,
    max(m.value) FILTER (WHERE m.metric = 'cost')       AS cost,
    max(m.value) FILTER (WHERE m.metric = 'risk')       AS risk,
    max(m.value) FILTER (WHERE m.metric = 'risk_all')   AS risk_all,
    max(m.value) FILTER (WHERE m.metric = 'oracle_risk')        AS oracle_risk,
    max(m.value) FILTER (WHERE m.metric = 'oracle_risk_all')    AS oracle_risk_all,
    max(m.value) FILTER (WHERE m.metric = 'avoidable_risk')     AS avoidable_risk,
    max(m.value) FILTER (WHERE m.metric = 'avoidable_risk_all') AS avoidable_risk_all,
    max(m.value) FILTER (WHERE m.metric = 'local_accuracy')     AS local_accuracy,
    max(m.value) FILTER (WHERE m.metric = 'local_rate') AS local_rate,
    max(m.value) FILTER (WHERE m.metric = 'n')          AS n,
    max(m.value) FILTER (WHERE m.metric = 'n_risk')     AS n_risk
FROM metrics m
JOIN eval_runs r USING (run_id)
GROUP BY ALL
