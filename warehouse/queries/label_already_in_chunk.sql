-- How many queries of the staged chunk (_cr2_chunk) a run already labelled (a replayed chunk adds nothing).
SELECT count(*) FROM labels WHERE run_id = ? AND query_id IN (SELECT query_id FROM _cr2_chunk)
