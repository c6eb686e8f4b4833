-- 004: who previewed a change, and the history of every transition.
--
-- changes.previewed_by names who previewed the change ('agent:<principal>'
-- or 'person:<name>'; '' for changes previewed before this migration). It
-- is fixed at preview.
--
-- ledger_history holds one row per transition of a change or a run,
-- appended by the ledger in the transaction of the transition itself:
-- seq orders the rows, at is the time of the transition (Unix
-- microseconds), from_status is '' when the row was created, actor names
-- who made the move ('' for the library's own moves, such as an expiry)
-- and note says more (a failure's kind, an operator's note). A change's
-- rows carry its run_id too, so that a run's history lists its changes';
-- a run's own rows have change_id NULL. Rows go with the change or run
-- they describe when prune deletes it (ON DELETE CASCADE). Changes and
-- runs from before this migration have no history rows.

ALTER TABLE changes ADD COLUMN previewed_by TEXT NOT NULL DEFAULT '';

CREATE TABLE ledger_history (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    change_id   TEXT    REFERENCES changes (id) ON DELETE CASCADE,
    run_id      TEXT    REFERENCES runs (id) ON DELETE CASCADE,
    from_status TEXT    NOT NULL,
    to_status   TEXT    NOT NULL CHECK (to_status <> ''),
    actor       TEXT    NOT NULL,
    note        TEXT    NOT NULL,
    CHECK (change_id IS NOT NULL OR run_id IS NOT NULL)
) STRICT;

CREATE INDEX ledger_history_at ON ledger_history (at);
CREATE INDEX ledger_history_change ON ledger_history (change_id, seq);
CREATE INDEX ledger_history_run ON ledger_history (run_id, seq);
CREATE INDEX ledger_history_actor ON ledger_history (actor, seq);
