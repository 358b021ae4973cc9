AUDIT (
  name large_events_are_large,
  severity error,
  description "Whatever the bar, no event under 20.00 is large; `stb deployment audit` runs it on a deployment's copy before it is promoted",
);

SELECT event_id, amount_cents
FROM __ref("large_events")
WHERE amount_cents < 2000
