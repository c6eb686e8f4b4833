-- 010: prune finds what it may delete through an index.
--
-- Prune selects finished changes last updated before a cut-off, and skips
-- applied changes still within their undo window. changes_finished holds
-- exactly the changes in a status prune may delete, ordered by the time
-- of their last update, with the columns that decide the undo window: the
-- selection reads a range of this index and only the rows it deletes,
-- never the payloads of the rows it keeps. Prune's query repeats the
-- index's WHERE term word for word, which is how SQLite knows it may use
-- a partial index.

CREATE INDEX changes_finished ON changes (updated_at, status, undoable, undo_expires_at)
    WHERE status IN ('expired', 'apply_failed', 'applied', 'undone', 'undo_failed');
