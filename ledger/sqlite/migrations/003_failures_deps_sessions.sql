-- 003: failure kinds, dependencies between changes, session runs, and the
-- indexes that paging and quotas need.
--
-- changes.failure says why an apply_failed or undo_failed change failed
-- ('' for every other change); nothing_written is 1 when the library knows
-- that the failed change wrote nothing. depends_on is the JSON array of
-- resources the change relies on (NULL when none); change_deps holds one
-- row per (change, resource) of it, so that "which changes depend on X" is
-- an index lookup. The trigger fills change_deps in the statement that
-- inserts the change, and the foreign key removes its rows with the change.
-- depends_on is fixed at preview: no update ever changes it.
--
-- runs.kind says how the run started ('task' or 'session'; every run
-- before this migration is a task run); session_key identifies the session
-- a session run belongs to ('' for task runs).

ALTER TABLE changes ADD COLUMN failure TEXT NOT NULL DEFAULT ''
    CHECK (failure IN ('', 'state_changed', 'error', 'result_too_large', 'interrupted'));
ALTER TABLE changes ADD COLUMN nothing_written INTEGER NOT NULL DEFAULT 0
    CHECK (nothing_written IN (0, 1));
ALTER TABLE changes ADD COLUMN depends_on TEXT;

CREATE TABLE change_deps (
    change_id TEXT NOT NULL REFERENCES changes (id) ON DELETE CASCADE,
    resource  TEXT NOT NULL,
    PRIMARY KEY (change_id, resource)
) STRICT, WITHOUT ROWID;

CREATE INDEX change_deps_resource ON change_deps (resource, change_id);

CREATE TRIGGER changes_deps_insert AFTER INSERT ON changes
    WHEN NEW.depends_on IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO change_deps (change_id, resource)
        SELECT NEW.id, value FROM json_each(NEW.depends_on);
END;

ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'task'
    CHECK (kind IN ('task', 'session'));
ALTER TABLE runs ADD COLUMN session_key TEXT NOT NULL DEFAULT '';

-- The session run of a caller: the newest open session run of its scope
-- and session.
CREATE INDEX runs_session ON runs (scope_hash, session_key, kind, status, created_at);
-- Pending changes per scope (the quota on previews).
CREATE INDEX changes_scope_status ON changes (scope_hash, status);
-- A run's changes, newest first, one page at a time; it replaces the
-- index on (run_id, created_at), which it covers.
DROP INDEX changes_run_created;
CREATE INDEX changes_run_created_id ON changes (run_id, created_at, id);
