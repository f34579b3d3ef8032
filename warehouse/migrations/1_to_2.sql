-- schema 1 → 2: thresholds gains delta (LTT) and "group" (Mondrian), and "group" joins the primary key.
-- DuckDB cannot change a primary key in place, so the table is rebuilt; old rows are crc/empirical, pooled.
CREATE TABLE thresholds_v2 (
    version          INTEGER NOT NULL,
    dist_id          VARCHAR NOT NULL,
    label_source     VARCHAR NOT NULL,
    gate_fingerprint VARCHAR NOT NULL,
    lam              DOUBLE NOT NULL,
    alpha            DOUBLE NOT NULL,
    tau              DOUBLE NOT NULL,
    n_calib          INTEGER NOT NULL,
    rule             VARCHAR NOT NULL,
    score_dtype      VARCHAR NOT NULL,
    created_at       TIMESTAMP NOT NULL,
    delta            DOUBLE,
    "group"          VARCHAR NOT NULL DEFAULT '',
    PRIMARY KEY (version, lam, alpha, "group")
);
INSERT INTO thresholds_v2 (version, dist_id, label_source, gate_fingerprint, lam, alpha, tau, n_calib, rule, score_dtype, created_at)
    SELECT version, dist_id, label_source, gate_fingerprint, lam, alpha, tau, n_calib, rule, score_dtype, created_at FROM thresholds;
DROP TABLE thresholds;
ALTER TABLE thresholds_v2 RENAME TO thresholds;
