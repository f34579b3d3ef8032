-- Paper Fig. ours_comparison: CR²'s deferred-branch variants (edge-only default, inclusive, fallback) at the
-- default α against the full-information reference m_full* (teacher utilities, no gate), over λ.
SELECT run_id, label_source, method, lam, alpha, accuracy, cost, local_rate, risk
FROM operating_points
WHERE benchmark = 'all' AND (method LIKE 'cr2-%' OR method IN ('cr2', 'full-info'))
  AND method NOT IN ('cr2-empirical', 'cr2-fixed-0.5', 'cr2-resplit')
