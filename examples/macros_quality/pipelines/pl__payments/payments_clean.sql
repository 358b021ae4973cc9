MODEL (
  order_by ["payment_id", "_replay_partition", "_replay_offset"],
  columns (
    payment_id (description "Payment identifier from the provider", audits [not_null]),
    currency (audits [accepted_values (values ["EUR", "USD"], severity warning)]),
  ),
);

SELECT
  JSONExtractString(kafka_value, 'payment_id')::String AS payment_id,
  @cents("JSONExtractFloat(kafka_value, 'amount')")::Int64 AS amount_cents,
  @reporting_currency()::LowCardinality(String) AS currency,
  _replay_partition::Int32 AS _replay_partition,
  _replay_offset::Int64 AS _replay_offset,
  coalesce(_replay_timestamp, _replay_landed_at)::DateTime64(3) AS _replay_timestamp
FROM __source("payments")
