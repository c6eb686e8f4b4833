-- 006: the history numbers its entries without AUTOINCREMENT, and a
-- prune leaves an entry of its own.
--
-- AUTOINCREMENT kept seq from ever being handed out twice by writing the
-- highest seq to sqlite_sequence in every transaction that appended an
-- entry: one more page in the write-ahead log per transition. Without it
-- SQLite numbers a new entry one above the highest entry present, so a
-- number is reused only if the highest entries are deleted, and only
-- prune deletes entries (with the changes and runs they describe). Each
-- prune transaction now appends its own entry before it deletes anything
-- (change_id and run_id NULL, to_status 'pruned', the operator as actor,
-- what it deleted as note). No foreign key ties that entry to a row, so it
-- is never deleted and stays above every number handed out before it: a
-- reader paging by seq (`mcp-changeset log --after`) never sees a number
-- twice.
--
-- The table is rebuilt (SQLite cannot drop AUTOINCREMENT in place) with
-- every entry and its seq. Where earlier prunes had deleted the highest
-- entries, sqlite_sequence remembers a higher number than any entry left;
-- one 'pruned' entry at that number keeps the numbering above it.

CREATE TABLE ledger_history_v6 (
    seq         INTEGER PRIMARY KEY,
    at          INTEGER NOT NULL,
    change_id   TEXT    REFERENCES changes (id) ON DELETE CASCADE,
    run_id      TEXT    REFERENCES runs (id) ON DELETE CASCADE,
    from_status TEXT    NOT NULL,
    to_status   TEXT    NOT NULL CHECK (to_status <> ''),
    actor       TEXT    NOT NULL,
    note        TEXT    NOT NULL,
    CHECK (change_id IS NOT NULL OR run_id IS NOT NULL OR to_status = 'pruned')
) STRICT;

INSERT INTO ledger_history_v6 (seq, at, change_id, run_id, from_status, to_status, actor, note)
    SELECT seq, at, change_id, run_id, from_status, to_status, actor, note FROM ledger_history;

INSERT INTO ledger_history_v6 (seq, at, change_id, run_id, from_status, to_status, actor, note)
    SELECT s.seq, CAST(strftime('%s', 'now') AS INTEGER) * 1000000, NULL, NULL, '', 'pruned', '',
           'entries up to this one were pruned before ledger schema 6'
    FROM sqlite_sequence AS s
    WHERE s.name = 'ledger_history'
      AND s.seq > COALESCE((SELECT max(seq) FROM ledger_history), 0);

DROP TABLE ledger_history;
ALTER TABLE ledger_history_v6 RENAME TO ledger_history;

CREATE INDEX ledger_history_at ON ledger_history (at);
CREATE INDEX ledger_history_change ON ledger_history (change_id, seq);
CREATE INDEX ledger_history_run ON ledger_history (run_id, seq);
