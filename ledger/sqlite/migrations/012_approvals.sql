-- 012: approvals by people, and their decisions.
--
-- ledger_approvals holds one row per request for people to approve the
-- apply or undo of a change (kind 'apply' or 'undo', change_id set) or
-- the undo of a run as its dry run planned it (kind 'run_undo', run_id
-- set). bound_hash is what it approves: the change's payload hash or the
-- run's plan hash when it was requested; using it requires the same.
-- needed is how many distinct people must approve and approvals how many
-- have; requested_by names the agent that asked ('agent:<principal>');
-- decided_by and note are the decisive decision's person and note; used_by
-- names who used it. deadline is never later than the expiry of the token
-- it goes with (the ledger's code decides that). An approval goes with its
-- change or run when prune deletes it.
--
-- ledger_decisions holds one row per person and approval: the primary
-- key makes one person's second decision a refused duplicate.
--
-- ledger_history.approval_id names the approval an entry is about (its
-- request, each decision, its use or expiry); such an entry also names
-- the approval's change or run, so that their histories list it.
--
-- Indexes: the waiting approvals, newest first, a page at a time (a
-- partial index that holds only them); the approvals of a change or of a
-- run; the open ones by deadline, for expiry.

CREATE TABLE ledger_approvals (
    id           TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    kind         TEXT    NOT NULL CHECK (kind IN ('apply', 'undo', 'run_undo')),
    change_id    TEXT    REFERENCES changes (id) ON DELETE CASCADE,
    run_id       TEXT    REFERENCES runs (id) ON DELETE CASCADE,
    bound_hash   TEXT    NOT NULL,
    needed       INTEGER NOT NULL CHECK (needed >= 1),
    approvals    INTEGER NOT NULL DEFAULT 0 CHECK (approvals >= 0),
    requested_by TEXT    NOT NULL,
    status       TEXT    NOT NULL
                 CHECK (status IN ('waiting', 'approved', 'declined', 'expired', 'used')),
    decided_by   TEXT    NOT NULL DEFAULT '',
    note         TEXT    NOT NULL DEFAULT '',
    used_by      TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    deadline     INTEGER NOT NULL,
    decided_at   INTEGER,
    used_at      INTEGER,
    CHECK ((kind = 'run_undo') = (run_id IS NOT NULL) AND (change_id IS NULL) = (run_id IS NOT NULL))
) STRICT;

CREATE INDEX ledger_approvals_waiting ON ledger_approvals (created_at, id) WHERE status = 'waiting';
CREATE INDEX ledger_approvals_change ON ledger_approvals (change_id, created_at, id);
CREATE INDEX ledger_approvals_run ON ledger_approvals (run_id, created_at, id);
CREATE INDEX ledger_approvals_open ON ledger_approvals (deadline)
    WHERE status = 'waiting' OR status = 'approved';

CREATE TABLE ledger_decisions (
    approval_id TEXT    NOT NULL REFERENCES ledger_approvals (id) ON DELETE CASCADE,
    person      TEXT    NOT NULL CHECK (person <> ''),
    verdict     TEXT    NOT NULL CHECK (verdict IN ('approve', 'decline')),
    note        TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (approval_id, person)
) STRICT, WITHOUT ROWID;

ALTER TABLE ledger_history ADD COLUMN approval_id TEXT
    REFERENCES ledger_approvals (id) ON DELETE CASCADE;

CREATE INDEX ledger_history_approval ON ledger_history (approval_id, seq) WHERE approval_id IS NOT NULL;
