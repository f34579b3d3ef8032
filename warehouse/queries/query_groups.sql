-- The Mondrian group attributes of every query: calibration.group picks one column.
SELECT query_id, benchmark, benchmark || '/' || coalesce(subset, '') AS subset FROM queries
