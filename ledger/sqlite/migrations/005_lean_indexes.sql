-- 005: fewer index pages written per transition.
--
-- Every write transaction of the ledger writes each b-tree page it touched
-- to the write-ahead log, and an index on a column that changes with every
-- transition (status, updated_at) is touched by every transition. Two such
-- indexes served only the changes that are still in flight or failed (the
-- pending quota, expiry, reconcile, the failure filters), and the actor
-- index of the history served only `log --by`.
--
-- changes_open replaces changes_status_updated and changes_scope_status.
-- It is partial: it holds only the changes in an in-flight or failed
-- status, so that a change at rest (applied, undone, expired) leaves it,
-- and it stays small. It holds expires_at so that the pending quota is
-- counted from the index alone: read from the row, expires_at lies after
-- the payload and the diff, and a large change's row spans overflow pages
-- that a count would otherwise walk for every pending change. Queries on those statuses must spell them as
-- "status = ? OR status = ?" for SQLite to use it (ledger/internal/sqlval
-- does). A filter on a status at rest reads changes_created newest first,
-- where nearly every row matches.
--
-- changes_updated goes: SQLite never chose it. Every list of changes is
-- ordered by creation, and SQLite reads changes_created newest first and
-- keeps the rows updated since the given time, stopping at the page's
-- limit (TestQueryPlans in ledger/sqlite checks the plans).
-- ledger_history_actor goes too: `log --by` alone reads the history in seq
-- order and keeps that actor's rows, as the changes' --by filter does;
-- with --since it starts where ledger_history_at says.

DROP INDEX changes_status_updated;
DROP INDEX changes_scope_status;
CREATE INDEX changes_open ON changes (status, scope_hash, expires_at, updated_at)
    WHERE status = 'pending' OR status = 'applying' OR status = 'undoing'
       OR status = 'apply_failed' OR status = 'undo_failed';

DROP INDEX changes_updated;
DROP INDEX ledger_history_actor;
