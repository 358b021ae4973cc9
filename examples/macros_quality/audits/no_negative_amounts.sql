-- A standalone audit: it passes when this query returns no rows. `stb audit` runs it
-- against the live tables once that command ships; compile does not read audits yet.
SELECT payment_id, amount_cents FROM __ref("payments_clean") WHERE amount_cents < 0
