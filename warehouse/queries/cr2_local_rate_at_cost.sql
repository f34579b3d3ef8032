-- CR²'s local rate at the operating point whose pooled cost is nearest $cost, per α (paper: c̄ ≈ 0.45); a tie
-- goes to the smaller λ, so every column comes from the same point and the answer never depends on row order.
SELECT alpha, arg_min(lam, (abs(cost - $cost), lam)) AS lam, arg_min(cost, (abs(cost - $cost), lam)) AS cost,
       arg_min(accuracy, (abs(cost - $cost), lam)) AS accuracy, arg_min(local_rate, (abs(cost - $cost), lam)) AS local_rate,
       arg_min(risk, (abs(cost - $cost), lam)) AS risk
FROM operating_points
WHERE run_id = $run_id AND method = 'cr2' AND benchmark = 'all'
GROUP BY alpha ORDER BY alpha
