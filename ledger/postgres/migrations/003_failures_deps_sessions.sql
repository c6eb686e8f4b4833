-- 003: failure kinds, dependencies between changes, session runs, and the
-- indexes that paging and quotas need, as in the SQLite ledger's migration
-- of the same number.
--
-- changes.failure says why an apply_failed or undo_failed change failed
-- ('' for every other change); nothing_written is true when the library
-- knows that the failed change wrote nothing. depends_on is the JSON array
-- of resources the change relies on, as text (NULL when none);
-- change_deps holds one row per (change, resource) of it, so that "which
-- changes depend on X" is an index lookup. The statement that inserts a
-- change fills change_deps too (a data-modifying WITH, see
-- ledger/postgres/changes.go), and the foreign key removes its rows with
-- the change. depends_on is fixed at preview: no update ever changes it.
--
-- runs.kind says how the run started ('task' or 'session'; every run
-- before this migration is a task run); session_key identifies the session
-- a session run belongs to ('' for task runs).

ALTER TABLE changes
    ADD COLUMN failure text NOT NULL DEFAULT ''
        CONSTRAINT changes_failure_valid
        CHECK (failure IN ('', 'state_changed', 'error', 'result_too_large', 'interrupted')),
    ADD COLUMN nothing_written boolean NOT NULL DEFAULT false,
    ADD COLUMN depends_on text;

CREATE TABLE change_deps (
    change_id text COLLATE "C" NOT NULL,
    resource  text NOT NULL,
    CONSTRAINT change_deps_pkey PRIMARY KEY (change_id, resource),
    CONSTRAINT change_deps_change_fkey FOREIGN KEY (change_id) REFERENCES changes (id) ON DELETE CASCADE
);

CREATE INDEX change_deps_resource ON change_deps (resource, change_id);

ALTER TABLE runs
    ADD COLUMN kind text NOT NULL DEFAULT 'task'
        CONSTRAINT runs_kind_valid CHECK (kind IN ('task', 'session')),
    ADD COLUMN session_key text NOT NULL DEFAULT '';

-- The session run of a caller: the newest open session run of its scope
-- and session.
CREATE INDEX runs_session ON runs (scope_hash, session_key, kind, status, created_at);
-- Pending changes per scope (the quota on previews).
CREATE INDEX changes_scope_status ON changes (scope_hash, status);
-- A run's changes, newest first, one page at a time; it replaces the
-- index on (run_id, created_at), which it covers.
DROP INDEX changes_run_created;
CREATE INDEX changes_run_created_id ON changes (run_id, created_at, id);
