TEST (name payments_are_parsed_in_cents);
WITH
  __source__payments AS (
    SELECT '{"payment_id":"p1","amount":12.34}' AS kafka_value, 0 AS _replay_partition, 1 AS _replay_offset,
           toDateTime64('2026-01-01 00:00:00', 3) AS _replay_timestamp, now64(3) AS _replay_landed_at
    UNION ALL
    SELECT '{"payment_id":"p2","amount":0.5}', 0, 2, NULL, toDateTime64('2026-01-02 00:00:00', 3)
  ),
  __expected__payments_clean AS (
    SELECT 'p1' AS payment_id, 1234 AS amount_cents, 'EUR' AS currency
    UNION ALL
    SELECT 'p2', 50, 'EUR'
  )
SELECT 1
