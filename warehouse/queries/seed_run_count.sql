-- How many seed-study runs the warehouse holds (`cr2 results` adds the seed section when there are any).
SELECT count(*) FROM seed_runs
