-- 015: a run records who started it, so that the runs of one agent are
-- listed from an index ("My agents' work" on the dashboard's runs list)
-- rather than from each run's first history entry.
--
-- started_by is the actor of the run's first history entry (the move
-- from "" to open), filled here for the runs already in the ledger; ''
-- for a run started by nobody in particular. runs_started_by serves the
-- filter in the list's own order, newest first.

ALTER TABLE runs ADD COLUMN started_by TEXT NOT NULL DEFAULT '';

UPDATE runs SET started_by = coalesce((SELECT h.actor FROM ledger_history h
    WHERE h.run_id = runs.id AND h.change_id IS NULL AND h.from_status = ''
    ORDER BY h.seq LIMIT 1), '');

CREATE INDEX runs_started_by ON runs (started_by, created_at, id);
