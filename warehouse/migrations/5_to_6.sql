-- schema 5 → 6: a threshold table names the router whose score it calibrates — 'cr2' (the gate; every table
-- stored so far) or a certified router's (cr2.certify: `<router>@<rule>`, its rule in `rule`). Readers of CR²'s
-- deployed table (newest version, the drift reference, `cr2 serve`) look at router = 'cr2' only.
ALTER TABLE IF EXISTS thresholds ADD COLUMN IF NOT EXISTS router VARCHAR DEFAULT 'cr2';
ALTER TABLE IF EXISTS thresholds ALTER COLUMN router SET NOT NULL;
