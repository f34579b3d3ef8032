-- 1 when a table of that name exists in the warehouse, else 0 (an old warehouse may lack newer tables).
SELECT count(*) FROM information_schema.tables WHERE table_name = $name
