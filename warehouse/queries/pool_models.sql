-- The model pool `cr2 ingest -c CONFIG` wrote, in pool order (0 = device model).
SELECT model_id, role, position FROM models ORDER BY position
