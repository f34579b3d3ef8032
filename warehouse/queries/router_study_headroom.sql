-- The router study's headroom per unit: the full-information router's mean saving (%) against uncertified KNN over
-- the validation target grid — the most any router could save on that unit.
SELECT pool AS unit, estimate
FROM pool_results
WHERE study_id = $study_id AND metric = 'mean_saving_pct' AND subject = 'full-information' AND other = 'knn'
ORDER BY unit
