-- 013: the terminal status 'declined' of a change whose apply a person
-- declined.
--
-- SQLite cannot alter a CHECK constraint, and rebuilding the changes
-- table would delete, through their foreign keys' ON DELETE CASCADE, the
-- history and dependencies of every change. So the constraint's text is
-- rewritten where SQLite keeps it, in sqlite_schema, as SQLite's own
-- documentation of ALTER TABLE describes for a change that no stored row
-- can break (a list of allowed values that only grows). The Go code that
-- runs this file (migrate.go) checks that exactly the one expected text
-- was rewritten, raises the schema cookie so that every connection reads
-- the schema again, and rolls the whole upgrade back otherwise.
--
-- changes_finished, the partial index prune reads (010), is made again
-- with the new status in its term.

PRAGMA writable_schema = ON;

UPDATE sqlite_schema
   SET sql = replace(sql,
       '''apply_failed'', ''undoing'', ''undone'', ''undo_failed''))',
       '''apply_failed'', ''undoing'', ''undone'', ''undo_failed'', ''declined''))')
 WHERE type = 'table' AND name = 'changes';

PRAGMA writable_schema = OFF;

DROP INDEX changes_finished;
CREATE INDEX changes_finished ON changes (updated_at, status, undoable, undo_expires_at)
    WHERE status IN ('expired', 'apply_failed', 'applied', 'undone', 'undo_failed', 'declined');
