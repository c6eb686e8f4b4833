-- 005: a prune leaves an entry of its own in the history.
--
-- Each prune transaction appends an entry before it deletes anything:
-- change_id and run_id NULL, to_status 'pruned', the operator as actor,
-- what it deleted as note. (The SQLite schema needs it to keep seq from
-- being handed out twice; here seq is a sequence, and the entry is the
-- record of who deleted what.)

ALTER TABLE ledger_history DROP CONSTRAINT ledger_history_row;
ALTER TABLE ledger_history ADD CONSTRAINT ledger_history_row
    CHECK (change_id IS NOT NULL OR run_id IS NOT NULL OR to_status = 'pruned');
