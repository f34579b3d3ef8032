-- The premise map (docs/results.md "When CR² pays"): per cell of the device-speed × channel grid,
-- the device / cheapest-edge cost ratio under ĉ, CR²'s fixed-accuracy saving vs KNN and vs the best single
-- model (retrained gate, and the base gate re-calibrated only) at the paper's targets 0.79–0.82 and averaged
-- over the validation target grid (a missed target costs the Always-model fallback), what re-calibration alone loses against retraining, the risk at α and the
-- local rate. Savings in %, positive: CR² is cheaper; each with its 95 % paired-bootstrap interval over the test
-- queries (training and calibration held fixed), its p from the same resamples, and one word per test: `verdict`
-- from the Holm p over its family — one study × method × reference, the means over the grid one family and the paper
-- targets another, across every cell of the study (cells are stored one at a time, so the family is corrected here,
-- the twin of cr2.evaluation.statistics.holm_adjust) — 'cheaper' / 'dearer' only where the interval excludes 0 and
-- p_holm < 0.05, else 'no difference detected'; `verdict_uncorrected` is the interval's own word, never a
-- conclusion. Heatmaps: premise_saving_vs_knn, premise_recal_loss.
WITH r AS (
    SELECT * FROM premise_results
),
tests AS (
    SELECT study_id, speed_factor, channel, method, reference, metric, target, estimate, lower, upper, p_value,
           method || ' vs ' || reference || CASE WHEN target IS NULL THEN ' / mean over the grid'
                                                 ELSE ' / paper targets' END AS family,
           CASE WHEN p_value IS NOT NULL AND isfinite(p_value) THEN p_value END AS p_ok
    FROM r
    WHERE metric IN ('saving_pct', 'mean_saving_pct')
      AND (target IS NULL OR round(target, 2) IN (SELECT round(target, 2) FROM paper_targets()))
),
ranked AS (
    SELECT *, count(p_ok) OVER (PARTITION BY study_id, family) AS family_size,
           row_number() OVER (PARTITION BY study_id, family, p_ok IS NULL ORDER BY p_ok, speed_factor, channel, target)
               AS p_rank
    FROM tests
),
pick AS (  -- Holm's step-down: p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)) over the tests with a p
    SELECT *,
           CASE WHEN p_ok IS NULL THEN NULL ELSE
               max(least(1.0, (family_size - p_rank + 1) * p_ok)) OVER (
                   PARTITION BY study_id, family, p_ok IS NULL ORDER BY p_rank
                   ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) END AS p_holm
    FROM ranked
)
SELECT c.study_id, c.label_source, c.label_source LIKE 'simulated%' AS labels_simulated,
       c.speed_factor, c.channel, c.mean_distance_m, c.cost_ratio_est, c.cost_ratio_realised,
       c.device_dearer_share_est, c.alpha, c.n_evaluable, c.n_resamples,
       p.method, p.reference, coalesce(p.target, -1) AS target, p.target IS NULL AS mean_over_targets,
       p.estimate AS saving_pct, p.lower AS saving_lower_pct, p.upper AS saving_upper_pct, p.p_value,
       p.family, p.family_size, p.p_holm,
       CASE WHEN p.estimate IS NULL OR isnan(p.estimate) THEN 'not reached'
            ELSE coalesce(saving_verdict_holm(p.lower, p.upper, p.p_holm), 'not reached') END AS verdict,
       CASE WHEN p.estimate IS NULL OR isnan(p.estimate) THEN 'not reached'
            ELSE coalesce(saving_verdict(p.lower, p.upper), 'not reached') END AS verdict_uncorrected,
       rm.estimate AS risk_max, ra.estimate AS risk_mean,
       lr.estimate AS local_rate
FROM premise_cells c
JOIN pick p USING (study_id, speed_factor, channel)
LEFT JOIN r rm ON rm.study_id = c.study_id AND rm.speed_factor = c.speed_factor AND rm.channel = c.channel
              AND rm.method = p.method AND rm.metric = 'risk_max'
LEFT JOIN r ra ON ra.study_id = c.study_id AND ra.speed_factor = c.speed_factor AND ra.channel = c.channel
              AND ra.method = p.method AND ra.metric = 'risk_mean'
LEFT JOIN r lr ON lr.study_id = c.study_id AND lr.speed_factor = c.speed_factor AND lr.channel = c.channel
              AND lr.method = p.method AND lr.metric = 'local_rate' AND round(lr.target, 2) = round(p.target, 2)
