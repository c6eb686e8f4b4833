-- 010: the terminal status 'declined' of a change whose apply a person
-- declined. PostgreSQL alters a CHECK constraint in place: the new one is
-- validated against the rows, which all pass it (the list only grows).

ALTER TABLE changes DROP CONSTRAINT changes_status_valid;
ALTER TABLE changes ADD CONSTRAINT changes_status_valid
    CHECK (status IN ('pending', 'expired', 'applying', 'applied',
                      'apply_failed', 'undoing', 'undone', 'undo_failed', 'declined'));
