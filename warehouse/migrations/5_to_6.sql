-- schema 5 → 6: a threshold table names the router it deploys — 'cr2' (CR²'s gate under its configured rule; every
-- table stored so far) or a certified router '<router>@<rule>' (cr2.routers.certify: e.g. 'knn@crc-avoidable', or
-- 'cr2@crc-oracle' for CR²'s gate certified by the certify stage). Readers of CR²'s deployed table (newest version,
-- the drift reference, `cr2 serve`) look at router = 'cr2' only.
ALTER TABLE IF EXISTS thresholds ADD COLUMN IF NOT EXISTS router VARCHAR DEFAULT 'cr2';
ALTER TABLE IF EXISTS thresholds ALTER COLUMN router SET NOT NULL;
