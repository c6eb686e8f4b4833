-- 011: the outbox of events to deliver, as in the SQLite ledger's
-- migration 014 (which says what each column holds). Senders on several
-- replicas lease due events with SELECT … FOR UPDATE SKIP LOCKED, so that
-- two never lease one event while its lease is live.

CREATE TABLE ledger_outbox (
    id              text COLLATE "C" NOT NULL,
    name            text    NOT NULL,
    body            text    NOT NULL,
    created_at      bigint  NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at bigint  NOT NULL,
    lease_owner     text    NOT NULL DEFAULT '',
    lease_until     bigint,
    delivered_at    bigint,
    last_error      text    NOT NULL DEFAULT '',
    CONSTRAINT ledger_outbox_pkey PRIMARY KEY (id),
    CONSTRAINT ledger_outbox_id_nonempty CHECK (id <> ''),
    CONSTRAINT ledger_outbox_name_nonempty CHECK (name <> ''),
    CONSTRAINT ledger_outbox_attempts CHECK (attempts >= 0)
);

CREATE INDEX ledger_outbox_due ON ledger_outbox (next_attempt_at, id) WHERE delivered_at IS NULL;
CREATE INDEX ledger_outbox_delivered ON ledger_outbox (delivered_at) WHERE delivered_at IS NOT NULL;
CREATE INDEX ledger_outbox_created ON ledger_outbox (created_at, id);
