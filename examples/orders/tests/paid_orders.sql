TEST (name only_paid_events_become_paid_orders);
WITH
  __ref__order_events AS (
    SELECT 'e1' AS event_id, 'o1' AS order_id, 'c1' AS customer_id, 'created' AS kind,
           toUInt64(900) AS amount_cents, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS event_time,
           0 AS _replay_partition, 1 AS _replay_offset
    UNION ALL
    SELECT 'e2', 'o1', 'c1', 'paid', 900, toDateTime64('2026-11-01 00:00:01', 3, 'UTC'), 0, 2
  ),
  __expected__paid_orders AS (
    SELECT 'o1' AS order_id, 'c1' AS customer_id, 900 AS amount_cents,
           toDateTime64('2026-11-01 00:00:01', 3, 'UTC') AS paid_at, 0 AS _replay_partition, 2 AS _replay_offset
  )
SELECT 1
