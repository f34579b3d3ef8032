-- The premise map (docs/results.md "When CR² pays"): per cell of the device-speed × channel grid,
-- the device / cheapest-edge cost ratio under ĉ, CR²'s fixed-accuracy saving vs KNN and vs the best single
-- model (retrained gate, and the base gate re-calibrated only) at the paper's targets 0.79–0.82 and averaged
-- over the validation target grid (a missed target costs the Always-model fallback), what re-calibration alone loses against retraining, the risk at α and the
-- local rate. Savings in %, positive: CR² is cheaper; each with its 95 % paired-bootstrap interval over the test
-- queries (training and calibration held fixed) and a verdict: 'cheaper' / 'dearer' only where the interval
-- excludes 0, else 'no difference detected'. Heatmaps: premise_saving_vs_knn, premise_recal_loss.
WITH r AS (
    SELECT * FROM premise_results
),
pick AS (
    SELECT study_id, speed_factor, channel, method, reference, metric, target, estimate, lower, upper, p_value,
           CASE WHEN estimate IS NULL OR isnan(estimate) THEN 'not reached'
                ELSE coalesce(saving_verdict(lower, upper), 'not reached') END AS verdict
    FROM r
    WHERE metric IN ('saving_pct', 'mean_saving_pct')
      AND (target IS NULL OR round(target, 2) IN (SELECT round(target, 2) FROM paper_targets()))
)
SELECT c.study_id, c.label_source, c.label_source LIKE 'simulated%' AS labels_simulated,
       c.speed_factor, c.channel, c.mean_distance_m, c.cost_ratio_est, c.cost_ratio_realised,
       c.device_dearer_share_est, c.alpha, c.n_evaluable, c.n_resamples,
       p.method, p.reference, coalesce(p.target, -1) AS target, p.target IS NULL AS mean_over_targets,
       p.estimate AS saving_pct, p.lower AS saving_lower_pct, p.upper AS saving_upper_pct, p.p_value, p.verdict,
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
