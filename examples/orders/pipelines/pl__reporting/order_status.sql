MODEL (
  kind view,
  description "Each order with when it was created and paid (a join)",
);

SELECT
  created.order_id::String AS order_id,
  created.customer_id::String AS customer_id,
  created.event_time::DateTime64(3, 'UTC') AS created_at,
  paid.paid_at::Nullable(DateTime64(3, 'UTC')) AS paid_at
FROM (SELECT * FROM __ref("order_events") WHERE kind = 'created') AS created
LEFT JOIN __ref("paid_orders") AS paid ON paid.order_id = created.order_id
SETTINGS join_use_nulls = 1
