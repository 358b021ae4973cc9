MODEL (
  description "Every order event, parsed once from the landing table",
  order_by ["order_id", "_replay_partition", "_replay_offset"],
  columns (
    event_id (description "Unique per event", audits [not_null]),
    kind (description "created, paid or shipped", audits [accepted_values (values ["created", "paid", "shipped"])]),
  ),
  audits [expression_is_true (expression "amount_cents > 0", severity warning)],
);

SELECT
  JSONExtractString(kafka_value, 'event_id')::String AS event_id,
  JSONExtractString(kafka_value, 'order_id')::String AS order_id,
  JSONExtractString(kafka_value, 'customer_id')::String AS customer_id,
  JSONExtractString(kafka_value, 'kind')::LowCardinality(String) AS kind,
  JSONExtractUInt(kafka_value, 'amount_cents')::UInt64 AS amount_cents,
  fromUnixTimestamp64Milli(JSONExtractInt(kafka_value, 'event_time_ms'), 'UTC')::DateTime64(3, 'UTC') AS event_time,
  _replay_partition::Int32 AS _replay_partition,
  _replay_offset::Int64 AS _replay_offset
FROM __source("orders")
