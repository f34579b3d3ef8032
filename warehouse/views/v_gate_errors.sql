-- Paper Fig. gate-error decomposition: for CR² at each (λ, α), the share of test queries the gate accepts
-- although an edge model is teacher-preferred (false accepts = the false-acceptance risk) and the share it
-- defers although the device model is teacher-optimal (false defers).
SELECT o.run_id, o.label_source, o.lam, o.alpha, o.risk AS false_accept,
       max(m.value) AS false_defer
FROM operating_points o
JOIN metrics m ON m.run_id = o.run_id AND m.method = o.method AND m.lam = o.lam
              AND m.alpha IS NOT DISTINCT FROM o.alpha AND m.benchmark = 'all' AND m.metric = 'false_defer'
WHERE o.method = 'cr2' AND o.benchmark = 'all'
GROUP BY ALL
