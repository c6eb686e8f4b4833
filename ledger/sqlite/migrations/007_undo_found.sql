-- 007: what a refused undo's check found.
--
-- undo_found_state is the state (canonical JSON) an undo's check found
-- when it refused because the resource was no longer as the apply left it
-- (after_state), or NULL. A refused apply keeps what its check found in
-- before_state, which an apply that never ran leaves free; an undo has no
-- such column to spare.

ALTER TABLE changes ADD COLUMN undo_found_state TEXT;
