MODEL (
  description "Every order event, parsed once from the landing table",
  order_by ["order_id", "_replay_partition", "_replay_offset"],
);

SELECT
  JSONExtractString(kafka_value, 'event_id')::String AS event_id,
  JSONExtractString(kafka_value, 'order_id')::String AS order_id,
  JSONExtractString(kafka_value, 'kind')::LowCardinality(String) AS kind,
  JSONExtractUInt(kafka_value, 'amount_cents')::UInt64 AS amount_cents,
  _replay_partition::Int32 AS _replay_partition,
  _replay_offset::Int64 AS _replay_offset
FROM __source("orders")
