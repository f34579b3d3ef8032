-- The drift features of the val split's (calibration) states under one state distribution.
-- Parameters: seed (splits), dist_id.
SELECT s.distance_m, s.rate_ul_bps, s.rate_dl_bps FROM states s
JOIN splits sp ON sp.query_id = s.query_id AND sp.seed = $seed AND sp.split = 'val'
WHERE s.dist_id = $dist_id
