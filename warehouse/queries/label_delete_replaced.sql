-- Drop a source/model's labels of the staged chunk's queries before they are written again.
DELETE FROM labels WHERE source = ? AND model_id = ? AND query_id IN (SELECT query_id FROM _cr2_chunk)
