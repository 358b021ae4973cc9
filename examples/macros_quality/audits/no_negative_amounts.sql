AUDIT (name no_negative_amounts, description "Refunds arrive as their own events, never as negative payments");
-- A standalone audit: it passes when this query returns no rows. `stb audit` will run it
-- against the live tables; compile checks it and writes it to compiled/audits/.
SELECT payment_id, amount_cents, currency
FROM __ref("payments_clean")
WHERE amount_cents < 0 OR currency != @reporting_currency()
