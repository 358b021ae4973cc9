MODEL (
  engine "ReplacingMergeTree(_replay_timestamp)",
  order_by ["customer_id"],
);

SELECT
  customer_id::UInt64 AS customer_id,
  email::String AS email,
  _replay_partition::Int32 AS _replay_partition,
  _replay_offset::Int64 AS _replay_offset,
  _replay_timestamp::DateTime64(3) AS _replay_timestamp
FROM __source("customer_events")
