-- The state distribution CR²'s newest threshold table was calibrated under (drift check reference).
SELECT dist_id FROM thresholds WHERE router = 'cr2' ORDER BY version DESC LIMIT 1
