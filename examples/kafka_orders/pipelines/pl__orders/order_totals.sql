MODEL (
  engine "SummingMergeTree(amount)",
  order_by ["status"],
  retention (duration "90d", timestamp_column day),
);

-- Additive per-status totals per day; SummingMergeTree merges the partial sums.
SELECT
  status::LowCardinality(String) AS status,
  toDate(_replay_timestamp)::Date AS day,
  sum(amount)::Float64 AS amount
FROM __ref("orders_clean")
GROUP BY status, day
