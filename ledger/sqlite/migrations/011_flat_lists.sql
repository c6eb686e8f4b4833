-- 011: every list of changes reads an index, however large the ledger.
--
-- changes_text is a full-text index (FTS5, trigram tokenizer, case folded)
-- of the summary, action and resource of every change. It keeps no copy of
-- the text (content='changes': it reads the rows when asked), only the
-- index, and no column sizes (columnsize=0: nothing ranks the matches). A
-- search reads the rowids whose text holds every trigram of the search
-- text in sequence, a superset of the changes that contain it, and
-- the ledger's exact test (LOWER(...) LIKE ... ESCAPE) then decides each
-- of them: the index only narrows, it never changes which changes match.
--
-- The index covers the changes up to a watermark, the rowid in
-- changes_text_tail; the newer ones, the tail, are fewer than 128, and a
-- search tests each of them exactly as well (ledger/internal/sqlval). FTS5
-- writes a new segment for every transaction that adds to it, which cost
-- each preview 0.2 to 0.5 ms when every insert indexed its own row: now
-- the insert that makes the tail 128 rows indexes all of them in one
-- statement, and moves the watermark past them. A row inserted at or
-- below the watermark (a rowid reused after the newest change was
-- deleted) is indexed at once. Deletes and updates keep the index in step
-- for the rows it covers; an update touches it only when the summary or
-- resource changed (the action never does).
--
-- changes_action, on (action, created_at, id), serves the filter by action
-- in the lists' own order, newest first: a page reads its own rows from
-- the index range of the value, whether the value is common, rare or
-- absent. The action never changes, so no update rewrites it.
--
-- change_actors serves the filter by actor the same way: one row per
-- (actor, change) for each actor who previewed, applied or undid the
-- change, keyed (actor, created_at, id), so that a page of one actor is
-- one range of its key, newest first, each change once. It replaces an
-- index per actor column: an UPDATE of a change assigns every mutable
-- column, and SQLite rewrites the entry of every index on an assigned
-- column even when its value stays the same, which cost a preview, apply
-- and undo about 0.2 ms on the four updates of the cycle. The triggers
-- below write it only when an actor column's value changes: a row for
-- the new actor, and the old actor's row deleted unless the actor still
-- holds another of the change's actor columns. The lists still test the
-- columns themselves (ledger/internal/sqlval), so the table only finds
-- candidates.
--
-- changes_open_created holds the in-flight and failed changes (the
-- statuses of changes_open) ordered by creation: the failures list their
-- rows from it, each page reading only its own rows instead of sorting
-- every older one again, and expiry finds the stale previews in it, with
-- their expiry, without reading their rows (ledger/sqlite/stale.go).
--
-- The backfill reads every change once, and the new indexes are built
-- from the table: 4.4 to 8.7 s for a ledger of 72,000 changes on the
-- machine of docs/benchmarks.md, so one to two minutes for a million.

CREATE VIRTUAL TABLE changes_text USING fts5(
    summary, action, resource,
    content = 'changes', content_rowid = 'rowid', columnsize = 0,
    tokenize = 'trigram case_sensitive 0'
);

CREATE TABLE changes_text_tail (
    indexed INTEGER NOT NULL -- the greatest rowid changes_text covers
) STRICT;

CREATE TRIGGER changes_text_insert AFTER INSERT ON changes BEGIN
    INSERT INTO changes_text (rowid, summary, action, resource)
        SELECT NEW.rowid, NEW.summary, NEW.action, NEW.resource
        WHERE NEW.rowid <= (SELECT indexed FROM changes_text_tail);
    INSERT INTO changes_text (rowid, summary, action, resource)
        SELECT rowid, summary, action, resource FROM changes
        WHERE rowid > (SELECT indexed FROM changes_text_tail)
          AND NEW.rowid >= (SELECT indexed FROM changes_text_tail) + 128;
    UPDATE changes_text_tail SET indexed = (SELECT max(rowid) FROM changes)
        WHERE NEW.rowid >= indexed + 128;
END;

CREATE TRIGGER changes_text_delete AFTER DELETE ON changes
    WHEN OLD.rowid <= (SELECT indexed FROM changes_text_tail)
BEGIN
    INSERT INTO changes_text (changes_text, rowid, summary, action, resource)
        VALUES ('delete', OLD.rowid, OLD.summary, OLD.action, OLD.resource);
END;

CREATE TRIGGER changes_text_update AFTER UPDATE OF summary, action, resource ON changes
    WHEN (OLD.summary IS NOT NEW.summary OR OLD.action IS NOT NEW.action
      OR OLD.resource IS NOT NEW.resource)
      AND OLD.rowid <= (SELECT indexed FROM changes_text_tail)
BEGIN
    INSERT INTO changes_text (changes_text, rowid, summary, action, resource)
        VALUES ('delete', OLD.rowid, OLD.summary, OLD.action, OLD.resource);
    INSERT INTO changes_text (rowid, summary, action, resource)
        VALUES (NEW.rowid, NEW.summary, NEW.action, NEW.resource);
END;

INSERT INTO changes_text (changes_text) VALUES ('rebuild');
INSERT INTO changes_text_tail (indexed) SELECT COALESCE(max(rowid), 0) FROM changes;

CREATE INDEX changes_action ON changes (action, created_at, id);

CREATE TABLE change_actors (
    actor      TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    id         TEXT    NOT NULL,
    PRIMARY KEY (actor, created_at, id)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER change_actors_insert AFTER INSERT ON changes BEGIN
    INSERT OR IGNORE INTO change_actors (actor, created_at, id)
        SELECT NEW.previewed_by, NEW.created_at, NEW.id WHERE NEW.previewed_by <> ''
        UNION ALL SELECT NEW.applied_by, NEW.created_at, NEW.id WHERE NEW.applied_by <> ''
        UNION ALL SELECT NEW.undone_by, NEW.created_at, NEW.id WHERE NEW.undone_by <> '';
END;

CREATE TRIGGER change_actors_previewed AFTER UPDATE OF previewed_by ON changes
    WHEN OLD.previewed_by IS NOT NEW.previewed_by
BEGIN
    DELETE FROM change_actors
        WHERE actor = OLD.previewed_by AND created_at = OLD.created_at AND id = OLD.id
          AND OLD.previewed_by NOT IN (NEW.applied_by, NEW.undone_by);
    INSERT OR IGNORE INTO change_actors (actor, created_at, id)
        SELECT NEW.previewed_by, NEW.created_at, NEW.id WHERE NEW.previewed_by <> '';
END;

CREATE TRIGGER change_actors_applied AFTER UPDATE OF applied_by ON changes
    WHEN OLD.applied_by IS NOT NEW.applied_by
BEGIN
    DELETE FROM change_actors
        WHERE actor = OLD.applied_by AND created_at = OLD.created_at AND id = OLD.id
          AND OLD.applied_by NOT IN (NEW.previewed_by, NEW.undone_by);
    INSERT OR IGNORE INTO change_actors (actor, created_at, id)
        SELECT NEW.applied_by, NEW.created_at, NEW.id WHERE NEW.applied_by <> '';
END;

CREATE TRIGGER change_actors_undone AFTER UPDATE OF undone_by ON changes
    WHEN OLD.undone_by IS NOT NEW.undone_by
BEGIN
    DELETE FROM change_actors
        WHERE actor = OLD.undone_by AND created_at = OLD.created_at AND id = OLD.id
          AND OLD.undone_by NOT IN (NEW.previewed_by, NEW.applied_by);
    INSERT OR IGNORE INTO change_actors (actor, created_at, id)
        SELECT NEW.undone_by, NEW.created_at, NEW.id WHERE NEW.undone_by <> '';
END;

CREATE TRIGGER change_actors_delete AFTER DELETE ON changes BEGIN
    DELETE FROM change_actors
        WHERE actor IN (OLD.previewed_by, OLD.applied_by, OLD.undone_by)
          AND created_at = OLD.created_at AND id = OLD.id;
END;

INSERT OR IGNORE INTO change_actors (actor, created_at, id)
    SELECT previewed_by, created_at, id FROM changes WHERE previewed_by <> ''
    UNION ALL SELECT applied_by, created_at, id FROM changes WHERE applied_by <> ''
    UNION ALL SELECT undone_by, created_at, id FROM changes WHERE undone_by <> '';

CREATE INDEX changes_open_created ON changes (status, created_at, id, expires_at)
    WHERE status = 'pending' OR status = 'applying' OR status = 'undoing'
       OR status = 'apply_failed' OR status = 'undo_failed';
