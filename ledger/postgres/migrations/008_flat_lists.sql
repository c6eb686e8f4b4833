-- 008: every list of changes reads an index, however large the ledger,
-- as the SQLite ledger's migration 011 does.
--
-- changes_text is a GIN index of the trigrams (pg_trgm) of LOWER(summary),
-- LOWER(action) and LOWER(resource): the very expressions a search tests
-- (LOWER(column) LIKE '%text%'), so the planner reads the index for the
-- LIKE terms themselves, and PostgreSQL rechecks every candidate against
-- them: the index only narrows, it never changes which changes match.
--
-- pg_trgm is a trusted extension: a role with CREATE on the database may
-- install it, and it is installed once per database. It goes into public
-- when that schema exists, so that dropping one ledger's schema never
-- takes the extension, and with it the indexes of other ledgers of the
-- database; else into the ledger's schema. A ledger whose role may not
-- install it is refused with a message that says who must run
-- CREATE EXTENSION pg_trgm (docs/postgres.md).
--
-- The indexes on (column, created_at, id) serve the filters by action and
-- by actor (previewed_by, applied_by, undone_by) and by status in the
-- lists' own order, newest first: a page reads its own rows from the index
-- range of the value, whether the value is common, rare or absent. A
-- filter by actor, or on several statuses, is such ranges merged
-- (ledger/internal/sqlval). changes_status_created also serves the lists
-- of failures, and expiry, which finds the stale previews from the index
-- alone (expires_at is included in it; ledger/postgres/stale.go).

DO $migration$
DECLARE
    ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'pg_trgm';
    IF ext_schema IS NULL THEN
        IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'public') THEN
            ext_schema := 'public';
        ELSE
            ext_schema := current_schema();
        END IF;
        BEGIN
            EXECUTE format('CREATE EXTENSION pg_trgm SCHEMA %I', ext_schema);
        EXCEPTION
        WHEN unique_violation OR duplicate_object THEN
            -- Another ledger of the database installed it meanwhile.
            SELECT n.nspname INTO ext_schema
                FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                WHERE e.extname = 'pg_trgm';
        WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'the ledger''s text search needs the extension pg_trgm, which this role may not install (%)', SQLERRM
                USING HINT = 'run CREATE EXTENSION pg_trgm in this database as its owner or a superuser, then open the ledger again';
        END;
    END IF;
    EXECUTE format('CREATE INDEX changes_text ON changes USING gin ('
        'lower(summary) %1$I.gin_trgm_ops, lower(action) %1$I.gin_trgm_ops, lower(resource) %1$I.gin_trgm_ops)', ext_schema);
END
$migration$;

CREATE INDEX changes_action ON changes (action, created_at, id);
CREATE INDEX changes_previewed_by ON changes (previewed_by, created_at, id);
CREATE INDEX changes_applied_by ON changes (applied_by, created_at, id);
CREATE INDEX changes_undone_by ON changes (undone_by, created_at, id);
CREATE INDEX changes_status_created ON changes (status, created_at, id) INCLUDE (expires_at);
