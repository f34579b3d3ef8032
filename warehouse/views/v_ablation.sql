-- Paper Table ablation: every CR² configuration at the operating point whose pooled normalised cost is
-- nearest the anchor c̄ = 0.45 — loss composition (ablation:sign-only, ablation:sign+margin, cr2 at the
-- default α), the w_mono sweep (ablation:w_mono=…), the CRC level α (cr2 at each α), the calibration rule
-- (cr2-empirical), the fixed local rates f (cr2-rate-f, no risk control) and the deferred path (cr2-inclusive,
-- cr2-fallback) — with accuracy and local rate. A tie in distance goes to the smaller λ.
WITH pts AS (
    SELECT run_id, method, alpha, lam, accuracy, cost, local_rate FROM operating_points
    JOIN methods m USING (run_id, method)
    WHERE benchmark = 'all' AND m.kind IN ('ablation', 'cr2', 'cr2-rule', 'cr2-rate', 'cr2-variant')
)
SELECT run_id, method, alpha,
       arg_min(lam, (abs(cost - 0.45), lam))        AS lam,
       arg_min(cost, (abs(cost - 0.45), lam))       AS cost,
       arg_min(accuracy, (abs(cost - 0.45), lam))   AS accuracy,
       arg_min(local_rate, (abs(cost - 0.45), lam)) AS local_rate,
       0.45                                  AS cost_anchor
FROM pts
GROUP BY run_id, method, alpha
