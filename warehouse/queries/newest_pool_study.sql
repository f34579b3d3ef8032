-- The newest study of pool_runs whose id starts with $prefix ('pools': `cr2 study pools`; 'diagnostics':
-- `cr2 study diagnostics`), or no row.
SELECT study_id FROM pool_runs WHERE starts_with(study_id, $prefix) ORDER BY created_at DESC, study_id LIMIT 1
