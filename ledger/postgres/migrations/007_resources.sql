-- 007: changes that name several resources.
--
-- resources is the JSON array of the resource names of a change that
-- touches several (a bulk update of rows), whose before_state and
-- after_state are then objects keyed by those names; NULL for a change
-- that names one resource (in resource) or none.

ALTER TABLE changes ADD COLUMN resources text;
