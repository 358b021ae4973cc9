MODEL (kind view);

SELECT status::String AS status, sum(amount)::Float64 AS amount
FROM __ref("order_totals")
GROUP BY status
