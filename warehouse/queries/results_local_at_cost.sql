-- CR²'s local rate at the operating point whose pooled cost is nearest $cost, per α (paper: c̄ ≈ 0.45).
SELECT alpha, arg_min(lam, abs(cost - $cost)) AS lam, arg_min(cost, abs(cost - $cost)) AS cost,
       arg_min(accuracy, abs(cost - $cost)) AS accuracy, arg_min(local_rate, abs(cost - $cost)) AS local_rate,
       arg_min(risk, abs(cost - $cost)) AS risk
FROM operating_points
WHERE run_id = $run_id AND method = 'cr2' AND benchmark = 'all'
GROUP BY alpha ORDER BY alpha
