-- 006: what a refused undo's check found.
--
-- undo_found_state is the state (canonical JSON) an undo's check found
-- when it refused because the resource was no longer as the apply left it
-- (after_state), or NULL.

ALTER TABLE changes ADD COLUMN undo_found_state text;
