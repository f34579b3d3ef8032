-- Paper Fig. pareto_main: every method's pooled (accuracy, normalised cost) operating points on the test
-- split, with on_frontier marking the points no other point of the same method dominates (CR² pooled over
-- the α grid: its envelope). Filter by run_id; zoom with a cost range.
WITH pts AS (
    SELECT run_id, label_source, method, lam, alpha, accuracy, cost, local_rate
    FROM operating_points WHERE benchmark = 'all' AND accuracy IS NOT NULL
)
SELECT p.*,
       NOT EXISTS (
           SELECT 1 FROM pts q
           WHERE q.run_id = p.run_id AND q.method = p.method
             AND q.cost <= p.cost AND q.accuracy >= p.accuracy
             AND (q.cost < p.cost OR q.accuracy > p.accuracy)
       ) AS on_frontier
FROM pts p
