MODEL (
  kind view,
  description "How many large events there are",
);

SELECT count()::UInt64 AS large_events FROM __ref("large_events")
