MODEL (
  order_by ["order_id", "_replay_partition", "_replay_offset"],
  partition_by "toYYYYMM(_replay_timestamp)",
  description "One row per order event, parsed from the landing table",
);

SELECT
  JSONExtractString(kafka_value, 'order_id')::String AS order_id,
  JSONExtractString(kafka_value, 'status')::LowCardinality(String) AS status,
  JSONExtractFloat(kafka_value, 'amount')::Float64 AS amount,
  _replay_partition::Int32 AS _replay_partition,
  _replay_offset::Int64 AS _replay_offset,
  coalesce(_replay_timestamp, _replay_landed_at)::DateTime64(3) AS _replay_timestamp
FROM __source("orders")
