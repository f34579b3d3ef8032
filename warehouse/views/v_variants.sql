-- Paper Fig. ours_comparison: CR²'s deferred-branch variants (edge-only default, inclusive, fallback) at the
-- default α against the full-information reference m_full* (teacher utilities, no gate), over λ.
SELECT run_id, label_source, method, lam, alpha, accuracy, cost, local_rate, risk
FROM operating_points
JOIN methods m USING (run_id, method)
WHERE benchmark = 'all' AND m.kind IN ('cr2', 'cr2-variant', 'reference')
