-- The newest fitted baseline of each router kind (router:<name>) for a label source. Parameter: $label_source.
SELECT kind, fingerprint, path
FROM artifacts
WHERE kind LIKE 'router:%' AND label_source = $label_source
QUALIFY row_number() OVER (PARTITION BY kind ORDER BY created_at DESC) = 1
