-- 009: approvals by people, and their decisions, as in the SQLite
-- ledger's migration 012 (which says what each column holds).
--
-- The number 008 is left to another branch's migration: a ledger past it
-- never runs it (see sqlval.LoadMigrations).

CREATE TABLE ledger_approvals (
    id           text COLLATE "C" NOT NULL,
    kind         text    NOT NULL,
    change_id    text COLLATE "C",
    run_id       text COLLATE "C",
    bound_hash   text    NOT NULL,
    needed       integer NOT NULL,
    approvals    integer NOT NULL DEFAULT 0,
    requested_by text    NOT NULL,
    status       text    NOT NULL,
    decided_by   text    NOT NULL DEFAULT '',
    note         text    NOT NULL DEFAULT '',
    used_by      text    NOT NULL DEFAULT '',
    created_at   bigint  NOT NULL,
    updated_at   bigint  NOT NULL,
    deadline     bigint  NOT NULL,
    decided_at   bigint,
    used_at      bigint,
    CONSTRAINT ledger_approvals_pkey PRIMARY KEY (id),
    CONSTRAINT ledger_approvals_id_nonempty CHECK (id <> ''),
    CONSTRAINT ledger_approvals_kind_valid CHECK (kind IN ('apply', 'undo', 'run_undo')),
    CONSTRAINT ledger_approvals_status_valid
        CHECK (status IN ('waiting', 'approved', 'declined', 'expired', 'used')),
    CONSTRAINT ledger_approvals_target
        CHECK ((kind = 'run_undo') = (run_id IS NOT NULL) AND (change_id IS NULL) = (run_id IS NOT NULL)),
    CONSTRAINT ledger_approvals_counts CHECK (needed >= 1 AND approvals >= 0),
    CONSTRAINT ledger_approvals_change_fkey FOREIGN KEY (change_id) REFERENCES changes (id) ON DELETE CASCADE,
    CONSTRAINT ledger_approvals_run_fkey FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE INDEX ledger_approvals_waiting ON ledger_approvals (created_at, id) WHERE status = 'waiting';
CREATE INDEX ledger_approvals_change ON ledger_approvals (change_id, created_at, id);
CREATE INDEX ledger_approvals_run ON ledger_approvals (run_id, created_at, id);
CREATE INDEX ledger_approvals_open ON ledger_approvals (deadline)
    WHERE status = 'waiting' OR status = 'approved';

CREATE TABLE ledger_decisions (
    approval_id text COLLATE "C" NOT NULL,
    person      text   NOT NULL,
    verdict     text   NOT NULL,
    note        text   NOT NULL,
    at          bigint NOT NULL,
    CONSTRAINT ledger_decisions_pkey PRIMARY KEY (approval_id, person),
    CONSTRAINT ledger_decisions_person_nonempty CHECK (person <> ''),
    CONSTRAINT ledger_decisions_verdict_valid CHECK (verdict IN ('approve', 'decline')),
    CONSTRAINT ledger_decisions_approval_fkey FOREIGN KEY (approval_id)
        REFERENCES ledger_approvals (id) ON DELETE CASCADE
);

ALTER TABLE ledger_history ADD COLUMN approval_id text COLLATE "C";
ALTER TABLE ledger_history ADD CONSTRAINT ledger_history_approval_fkey
    FOREIGN KEY (approval_id) REFERENCES ledger_approvals (id) ON DELETE CASCADE;

CREATE INDEX ledger_history_approval ON ledger_history (approval_id, seq) WHERE approval_id IS NOT NULL;
