AUDIT ();
-- Generic audit with a list parameter: the quoted placeholder becomes string literals.
SELECT @column AS value, count() AS rows FROM __ref("@model") WHERE @column NOT IN (@'values') GROUP BY @column
