-- The fresh fit of simulated-irt-v2's shape recorded by a simcheck run.
SELECT statistic AS parameter, value FROM simcheck WHERE run_id = $run_id AND source = 'fit' ORDER BY statistic
