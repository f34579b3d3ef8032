-- Paper Table router_complexity: parameters and FLOPs per routing decision of each router head (the
-- shared MiniLM encoder excluded), with fit time, for every fitted artefact (newest first per kind).
SELECT kind, fingerprint, params, flops, fit_seconds, label_source, created_at
FROM artifacts
ORDER BY kind, created_at DESC
