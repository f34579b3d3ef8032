-- The state distribution the newest threshold table was calibrated under (drift check reference).
SELECT dist_id FROM thresholds ORDER BY version DESC LIMIT 1
