-- 014: the outbox of events to deliver.
--
-- One row per event (an approval requested or decided, a change that
-- failed, a run undone), written in the transaction of the transition
-- that causes it. id is the delivery ID, the same on every attempt; body
-- is the event's JSON, never a token or a payload. A sender leases due
-- events (lease_owner, lease_until), counts an attempt on each, and
-- marks each delivered (delivered_at) or failed (next_attempt_at,
-- last_error). No foreign key: an event outlives a pruned change until it
-- is delivered.
--
-- ledger_outbox_due holds the undelivered events by when they are due, so
-- that a sender's lease reads only those; ledger_outbox_delivered the
-- delivered ones by when, for pruning.

CREATE TABLE ledger_outbox (
    id              TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    name            TEXT    NOT NULL CHECK (name <> ''),
    body            TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at INTEGER NOT NULL,
    lease_owner     TEXT    NOT NULL DEFAULT '',
    lease_until     INTEGER,
    delivered_at    INTEGER,
    last_error      TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX ledger_outbox_due ON ledger_outbox (next_attempt_at, id) WHERE delivered_at IS NULL;
CREATE INDEX ledger_outbox_delivered ON ledger_outbox (delivered_at) WHERE delivered_at IS NOT NULL;
CREATE INDEX ledger_outbox_created ON ledger_outbox (created_at, id);
