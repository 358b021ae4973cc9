TEST (name cents_keep_sign_and_drop_float_noise, mode macro);
-- A macro-mode test: the macro on its own, against plain SQL. 1.005 is 100.4999... as a
-- float, so it rounds down.
WITH
  amounts AS (SELECT arrayJoin([1.005, 2.5, -2.5]) AS amount),
  __macro_actual__ AS (SELECT amount, @cents("amount") AS cents FROM amounts),
  __macro_expected__ AS (
    SELECT 1.005 AS amount, toInt64(100) AS cents
    UNION ALL SELECT 2.5, toInt64(250)
    UNION ALL SELECT -2.5, toInt64(-250)
  )
SELECT 1
