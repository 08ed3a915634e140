-- public_search is what List's Search looks in for a viewer without a
-- token (Query.Public): search's lines with each recipient as
-- notification.PublicRecipient shows it, lower-cased. Open fills it in
-- where it is NULL: the rows stored before it existed, and those a later
-- migration clears because PublicRecipient changed.
ALTER TABLE notifications ADD COLUMN public_search text;
-- The rows Open has to fill in, found without a scan; empty otherwise.
CREATE INDEX notifications_public_search_unset ON notifications (id) WHERE public_search IS NULL;
-- A trigram index as search has (0002), where pg_trgm is installed.
DO $$
DECLARE
    ext_schema name;
BEGIN
    SELECT extnamespace::regnamespace::name INTO ext_schema FROM pg_extension WHERE extname = 'pg_trgm';
    IF ext_schema IS NULL THEN
        RAISE NOTICE 'no trigram index for a visitor''s notification search (no pg_trgm): List will scan';
        RETURN;
    END IF;
    EXECUTE format('CREATE INDEX notifications_public_search_trgm ON notifications USING gin (public_search %I.gin_trgm_ops)', ext_schema);
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'no trigram index for a visitor''s notification search (%): List will scan', SQLERRM;
END
$$;
