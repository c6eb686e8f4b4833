-- 002: redaction of sensitive payload fields once a change is terminal.
--
-- redact_fields is a JSON array of field names (NULL when none are marked);
-- redacted_at is when their values were replaced by keyed hashes.

ALTER TABLE changes ADD COLUMN redact_fields TEXT;
ALTER TABLE changes ADD COLUMN redacted_at INTEGER;
