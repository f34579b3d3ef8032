-- 1 when table $table has a column $column, else 0 (a warehouse of an older schema, read as it is, may lack it).
SELECT count(*) FROM information_schema.columns WHERE table_name = $table AND column_name = $column
