AUDIT (name revenue_matches_paid_orders, severity error);
-- Customers whose summed revenue differs from their paid orders: none expected.
SELECT r.customer_id, r.revenue_cents, p.paid_cents
FROM (SELECT customer_id, sum(revenue_cents) AS revenue_cents FROM __ref("customer_revenue") GROUP BY customer_id) AS r
FULL OUTER JOIN (SELECT customer_id, sum(amount_cents) AS paid_cents FROM __ref("paid_orders") GROUP BY customer_id) AS p
  ON r.customer_id = p.customer_id
WHERE r.revenue_cents != p.paid_cents
