-- Store the cost normalisation scales T0/E0 under their meta key.
INSERT OR REPLACE INTO meta VALUES (?, ?)
