-- 011: every list of changes reads an index, however large the ledger.
--
-- changes_text is a full-text index (FTS5, trigram tokenizer, case folded)
-- of the summary, action and resource of every change. It keeps no copy of
-- the text (content='changes': it reads the rows when asked), only the
-- index, and no column sizes (columnsize=0: nothing ranks the matches). A search reads the rowids whose text holds every trigram of the
-- search text in sequence, a superset of the changes that contain it, and
-- the ledger's exact test (LOWER(...) LIKE ... ESCAPE) then decides each
-- of them: the index only narrows, it never changes which changes match.
-- The triggers keep it in the transaction that writes the row; an update
-- touches it only when the summary or resource changed (the action never
-- does), so that a transition costs no more writes than before.
--
-- The indexes on (column, created_at, id) serve the filters by action and
-- by actor (previewed_by, applied_by, undone_by) in the lists' own order,
-- newest first: a page reads its own rows from the index range of the
-- value, whether the value is common, rare or absent. A filter by actor is
-- three such ranges merged (ledger/internal/sqlval).
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

CREATE TRIGGER changes_text_insert AFTER INSERT ON changes BEGIN
    INSERT INTO changes_text (rowid, summary, action, resource)
        VALUES (NEW.rowid, NEW.summary, NEW.action, NEW.resource);
END;

CREATE TRIGGER changes_text_delete AFTER DELETE ON changes BEGIN
    INSERT INTO changes_text (changes_text, rowid, summary, action, resource)
        VALUES ('delete', OLD.rowid, OLD.summary, OLD.action, OLD.resource);
END;

CREATE TRIGGER changes_text_update AFTER UPDATE OF summary, action, resource ON changes
    WHEN OLD.summary IS NOT NEW.summary OR OLD.action IS NOT NEW.action
      OR OLD.resource IS NOT NEW.resource
BEGIN
    INSERT INTO changes_text (changes_text, rowid, summary, action, resource)
        VALUES ('delete', OLD.rowid, OLD.summary, OLD.action, OLD.resource);
    INSERT INTO changes_text (rowid, summary, action, resource)
        VALUES (NEW.rowid, NEW.summary, NEW.action, NEW.resource);
END;

INSERT INTO changes_text (changes_text) VALUES ('rebuild');

CREATE INDEX changes_action ON changes (action, created_at, id);
CREATE INDEX changes_previewed_by ON changes (previewed_by, created_at, id);
CREATE INDEX changes_applied_by ON changes (applied_by, created_at, id);
CREATE INDEX changes_undone_by ON changes (undone_by, created_at, id);

CREATE INDEX changes_open_created ON changes (status, created_at, id, expires_at)
    WHERE status = 'pending' OR status = 'applying' OR status = 'undoing'
       OR status = 'apply_failed' OR status = 'undo_failed';
