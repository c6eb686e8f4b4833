-- 001: the initial schema of a changeset ledger on PostgreSQL.
--
-- The same tables, columns, statuses and constraints as the SQLite ledger
-- (ledger/sqlite/migrations/001_initial.sql), so that both backends behave
-- alike:
--
--   * times are bigint Unix microseconds (UTC); NULL is the zero time;
--   * JSON values are canonical JSON in text columns, never jsonb, which
--     would reorder keys and change the bytes that hashes were taken of;
--     NULL is a nil value;
--   * IDs sort by byte value (COLLATE "C"), as in SQLite, whatever the
--     database's collation, so that "newest first, ties by ID" is the same
--     order on both backends.
--
-- The Go code runs this file with search_path set to the ledger's schema,
-- in the transaction that records it in changeset_migrations. Constraints
-- are named so that Check can verify that they are still there.

CREATE TABLE runs (
    id                 text COLLATE "C" NOT NULL,
    label              text   NOT NULL DEFAULT '',
    scope_hash         text   NOT NULL DEFAULT '',
    status             text   NOT NULL,
    plan_hash          text   NOT NULL DEFAULT '',
    confirm_hash       text   NOT NULL DEFAULT '',
    confirm_expires_at bigint,
    report             text,
    undone_by          text   NOT NULL DEFAULT '',
    created_at         bigint NOT NULL,
    updated_at         bigint NOT NULL,
    CONSTRAINT runs_pkey PRIMARY KEY (id),
    CONSTRAINT runs_id_nonempty CHECK (id <> ''),
    CONSTRAINT runs_status_valid
        CHECK (status IN ('open', 'undoing', 'undone', 'partially_undone'))
);

CREATE INDEX runs_created ON runs (created_at, id);

CREATE TABLE changes (
    id              text COLLATE "C" NOT NULL,
    action          text    NOT NULL,
    status          text    NOT NULL,
    scope_hash      text    NOT NULL DEFAULT '',
    run_id          text COLLATE "C",
    resource        text    NOT NULL DEFAULT '',
    payload         text,
    payload_hash    text    NOT NULL DEFAULT '',
    diff            text,
    summary         text    NOT NULL DEFAULT '',
    warnings        text,
    state_hash      text    NOT NULL DEFAULT '',
    before_state    text,
    after_state     text,
    confirm_hash    text    NOT NULL DEFAULT '',
    undo_hash       text    NOT NULL DEFAULT '',
    undoable        boolean NOT NULL DEFAULT false,
    transactional   boolean NOT NULL DEFAULT false,
    result          text,
    error_type      text    NOT NULL DEFAULT '',
    error           text    NOT NULL DEFAULT '',
    note            text    NOT NULL DEFAULT '',
    applied_by      text    NOT NULL DEFAULT '',
    undone_by       text    NOT NULL DEFAULT '',
    created_at      bigint  NOT NULL,
    updated_at      bigint  NOT NULL,
    expires_at      bigint,
    applied_at      bigint,
    undo_expires_at bigint,
    undone_at       bigint,
    CONSTRAINT changes_pkey PRIMARY KEY (id),
    CONSTRAINT changes_id_nonempty CHECK (id <> ''),
    CONSTRAINT changes_status_valid
        CHECK (status IN ('pending', 'expired', 'applying', 'applied',
                          'apply_failed', 'undoing', 'undone', 'undo_failed')),
    CONSTRAINT changes_run_fkey FOREIGN KEY (run_id) REFERENCES runs (id),
    CONSTRAINT changes_run_nonempty CHECK (run_id IS NULL OR run_id <> ''),
    -- An applied change records when it was applied.
    CONSTRAINT changes_applied_has_time CHECK (status <> 'applied' OR applied_at IS NOT NULL)
);

CREATE INDEX changes_status_updated ON changes (status, updated_at);
CREATE INDEX changes_run_created ON changes (run_id, created_at);
CREATE INDEX changes_updated ON changes (updated_at);
CREATE INDEX changes_created ON changes (created_at, id);

CREATE TABLE meta (
    key   text COLLATE "C" NOT NULL,
    value bytea NOT NULL,
    CONSTRAINT meta_pkey PRIMARY KEY (key)
);
