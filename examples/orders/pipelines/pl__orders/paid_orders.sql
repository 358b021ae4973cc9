MODEL (
  description "Orders at the moment they were paid",
  order_by ["order_id", "_replay_partition", "_replay_offset"],
);

SELECT
  order_id::String AS order_id,
  customer_id::String AS customer_id,
  amount_cents::UInt64 AS amount_cents,
  event_time::DateTime64(3, 'UTC') AS paid_at,
  _replay_partition::Int32 AS _replay_partition,
  _replay_offset::Int64 AS _replay_offset
FROM __ref("order_events")
WHERE kind = 'paid'
