-- Paper Fig. risk_control: CR²'s test false-acceptance risk at each (λ, α) on the fixed split, next to the
-- Monte-Carlo mean, 5–95 % band and standard error over random calibration/test re-splits; the guarantee
-- is E[risk] ≤ α pointwise in λ (compare with the y = α line). `risk` is over every test row, the
-- exchangeable population the guarantee is stated for (as the re-splits are); risk_solvable is over the
-- paper's test set (queries some model solves). The re-splits are cr2@crc's (v_certified_validity): the same draws,
-- so both give the same numbers at every α both grids hold, and the same validity verdict (cr2.evaluation.validity).
SELECT o.run_id, o.label_source, o.lam, o.alpha, o.risk_all AS risk, o.risk AS risk_solvable, o.n_risk,
       max(m.value) FILTER (WHERE m.metric = 'risk_mean') AS risk_mean,
       max(m.value) FILTER (WHERE m.metric = 'risk_q05')  AS risk_q05,
       max(m.value) FILTER (WHERE m.metric = 'risk_q95')  AS risk_q95,
       max(m.value) FILTER (WHERE m.metric = 'risk_se')   AS risk_se
FROM operating_points o
LEFT JOIN metrics m ON m.run_id = o.run_id AND m.method = 'cr2-resplit' AND m.lam = o.lam AND m.alpha = o.alpha
WHERE o.method = 'cr2' AND o.benchmark = 'all'
GROUP BY ALL
