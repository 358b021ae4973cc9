AUDIT ();
-- Generic audit: a MODEL header attaches it to a column with `audits [not_null]`, which
-- fills in the model and column placeholders.
SELECT * FROM __ref("@model") WHERE @column IS NULL
