-- Whether states of one distribution are stored. Parameters: dist_id.
SELECT EXISTS (SELECT 1 FROM states WHERE dist_id = ?)
