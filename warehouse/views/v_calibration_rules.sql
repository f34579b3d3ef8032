-- Paper Fig. calibration_methods: the same gate under three threshold rules — CRC (cr2), the empirical
-- risk rule without the +1 correction (cr2-empirical) and a fixed threshold 0.5 (cr2-fixed-0.5) — as
-- accuracy–cost points over λ, with their test false-acceptance risk and local rate (alpha NULL: no α).
SELECT run_id, label_source, method AS rule, lam, alpha, accuracy, cost, risk, local_rate
FROM operating_points
JOIN methods m USING (run_id, method)
WHERE benchmark = 'all' AND m.kind IN ('cr2', 'cr2-rule', 'uncalibrated')
