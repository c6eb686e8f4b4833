-- 002: redaction of sensitive payload fields once a change is terminal,
-- as in the SQLite ledger's migration of the same number.
--
-- redact_fields is a JSON array of field names as text (NULL when none are
-- marked); redacted_at is when their values were replaced by keyed hashes,
-- in Unix microseconds.

ALTER TABLE changes ADD COLUMN redact_fields text;
ALTER TABLE changes ADD COLUMN redacted_at bigint;
