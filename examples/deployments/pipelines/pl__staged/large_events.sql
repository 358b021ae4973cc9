MODEL (
  description "Events of at least 20.00; the demo raises the bar and stages it again",
  order_by ["order_id", "_replay_partition", "_replay_offset"],
);

SELECT
  event_id::String AS event_id,
  order_id::String AS order_id,
  amount_cents::UInt64 AS amount_cents,
  _replay_partition::Int32 AS _replay_partition,
  _replay_offset::Int64 AS _replay_offset
FROM __ref("order_events")
WHERE amount_cents >= 2000
