MODEL (
  description "Paid revenue per customer, summed as orders are paid",
  engine "SummingMergeTree",
  order_by ["customer_id"],
);

SELECT
  customer_id::String AS customer_id,
  sum(amount_cents)::UInt64 AS revenue_cents,
  count()::UInt64 AS paid_orders
FROM __ref("paid_orders")
GROUP BY customer_id
