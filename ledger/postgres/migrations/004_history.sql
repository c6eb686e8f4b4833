-- 004: who previewed a change, and the history of every transition, as in
-- the SQLite ledger's migration of the same number.
--
-- changes.previewed_by names who previewed the change ('agent:<principal>'
-- or 'person:<name>'; '' for changes previewed before this migration). It
-- is fixed at preview.
--
-- ledger_history holds one row per transition of a change or a run,
-- appended by the ledger in the transaction of the transition itself:
-- seq orders the rows (two transitions of one row are in commit order,
-- since the row is locked from its read to the commit), at is the time of
-- the transition (Unix microseconds), from_status is '' when the row was
-- created, actor names who made the move ('' for the library's own moves,
-- such as an expiry) and note says more (a failure's kind, an operator's
-- note). A change's rows carry its run_id too, so that a run's history
-- lists its changes'; a run's own rows have change_id NULL. Rows go with
-- the change or run they describe when prune deletes it (ON DELETE
-- CASCADE). Changes and runs from before this migration have no history
-- rows.

ALTER TABLE changes ADD COLUMN previewed_by text NOT NULL DEFAULT '';

CREATE TABLE ledger_history (
    seq         bigserial,
    at          bigint NOT NULL,
    change_id   text COLLATE "C",
    run_id      text COLLATE "C",
    from_status text   NOT NULL,
    to_status   text   NOT NULL,
    actor       text   NOT NULL,
    note        text   NOT NULL,
    CONSTRAINT ledger_history_pkey PRIMARY KEY (seq),
    CONSTRAINT ledger_history_change_fkey FOREIGN KEY (change_id) REFERENCES changes (id) ON DELETE CASCADE,
    CONSTRAINT ledger_history_run_fkey FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE,
    CONSTRAINT ledger_history_to_nonempty CHECK (to_status <> ''),
    CONSTRAINT ledger_history_row CHECK (change_id IS NOT NULL OR run_id IS NOT NULL)
);

CREATE INDEX ledger_history_at ON ledger_history (at);
CREATE INDEX ledger_history_change ON ledger_history (change_id, seq);
CREATE INDEX ledger_history_run ON ledger_history (run_id, seq);
CREATE INDEX ledger_history_actor ON ledger_history (actor, seq);
