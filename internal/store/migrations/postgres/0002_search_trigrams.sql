-- Substring search (List's Search) with a trigram index, where the pg_trgm
-- extension can be had: it ships with PostgreSQL's contrib and is trusted,
-- so a database owner may create it. Where it cannot, List scans instead,
-- and this migration is recorded all the same.
--
-- The extension goes to schema public, so that dropping the schema the
-- store lives in never drops an extension other schemas use; an extension
-- installed elsewhere already is used where it is.
DO $$
DECLARE
    ext_schema name;
BEGIN
    -- Stores in several schemas of one database may migrate at once.
    PERFORM pg_advisory_xact_lock(hashtext('relay/history/pg_trgm'));
    SELECT extnamespace::regnamespace::name INTO ext_schema FROM pg_extension WHERE extname = 'pg_trgm';
    IF ext_schema IS NULL THEN
        CREATE EXTENSION pg_trgm SCHEMA public;
        ext_schema := 'public';
    END IF;
    EXECUTE format('CREATE INDEX notifications_search_trgm ON notifications USING gin (search %I.gin_trgm_ops)', ext_schema);
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'no trigram index for notification search (%): List will scan', SQLERRM;
END
$$;
