-- 001: the initial schema of a changeset ledger.
--
-- Times are INTEGER Unix microseconds (UTC); NULL is the zero time.
-- JSON values are canonical JSON TEXT; NULL is a nil value.
-- The application_id and user_version pragmas are set by the Go code that
-- applies this file, in the same transaction.

CREATE TABLE runs (
    id                 TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    label              TEXT    NOT NULL DEFAULT '',
    scope_hash         TEXT    NOT NULL DEFAULT '',
    status             TEXT    NOT NULL
                       CHECK (status IN ('open', 'undoing', 'undone', 'partially_undone')),
    plan_hash          TEXT    NOT NULL DEFAULT '',
    confirm_hash       TEXT    NOT NULL DEFAULT '',
    confirm_expires_at INTEGER,
    report             TEXT,
    undone_by          TEXT    NOT NULL DEFAULT '',
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
) STRICT;

CREATE INDEX runs_created ON runs (created_at, id);

CREATE TABLE changes (
    id              TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    action          TEXT    NOT NULL,
    status          TEXT    NOT NULL
                    CHECK (status IN ('pending', 'expired', 'applying', 'applied',
                                      'apply_failed', 'undoing', 'undone', 'undo_failed')),
    scope_hash      TEXT    NOT NULL DEFAULT '',
    run_id          TEXT    REFERENCES runs (id) CHECK (run_id IS NULL OR run_id <> ''),
    resource        TEXT    NOT NULL DEFAULT '',
    payload         TEXT,
    payload_hash    TEXT    NOT NULL DEFAULT '',
    diff            TEXT,
    summary         TEXT    NOT NULL DEFAULT '',
    warnings        TEXT,
    state_hash      TEXT    NOT NULL DEFAULT '',
    before_state    TEXT,
    after_state     TEXT,
    confirm_hash    TEXT    NOT NULL DEFAULT '',
    undo_hash       TEXT    NOT NULL DEFAULT '',
    undoable        INTEGER NOT NULL DEFAULT 0 CHECK (undoable IN (0, 1)),
    transactional   INTEGER NOT NULL DEFAULT 0 CHECK (transactional IN (0, 1)),
    result          TEXT,
    error_type      TEXT    NOT NULL DEFAULT '',
    error           TEXT    NOT NULL DEFAULT '',
    note            TEXT    NOT NULL DEFAULT '',
    applied_by      TEXT    NOT NULL DEFAULT '',
    undone_by       TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    expires_at      INTEGER,
    applied_at      INTEGER,
    undo_expires_at INTEGER,
    undone_at       INTEGER,
    -- An applied change records when it was applied.
    CHECK (status <> 'applied' OR applied_at IS NOT NULL)
) STRICT;

CREATE INDEX changes_status_updated ON changes (status, updated_at);
CREATE INDEX changes_run_created ON changes (run_id, created_at);
CREATE INDEX changes_updated ON changes (updated_at);
CREATE INDEX changes_created ON changes (created_at, id);

CREATE TABLE meta (
    key   TEXT NOT NULL PRIMARY KEY,
    value BLOB NOT NULL
) STRICT, WITHOUT ROWID;
