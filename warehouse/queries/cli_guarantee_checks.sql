-- The promises of one validity run that have a bound (`cr2 guarantees`' table; v_guarantees).
SELECT *
FROM v_guarantees
WHERE run_id = $run_id AND bound IS NOT NULL
ORDER BY check_name, "group", alpha
