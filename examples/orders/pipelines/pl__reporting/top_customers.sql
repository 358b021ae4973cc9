MODEL (
  kind view,
  description "Customers by paid revenue",
);

SELECT
  customer_id::String AS customer_id,
  sum(revenue_cents)::UInt64 AS revenue_cents,
  sum(paid_orders)::UInt64 AS paid_orders
FROM __ref("customer_revenue")
GROUP BY customer_id
ORDER BY revenue_cents DESC
