-- public_search is what List's Search looks in for a viewer without a
-- token (Query.Public): search's lines with each recipient as
-- notification.PublicRecipient shows it, lower-cased. Open fills it in
-- where it is NULL: the rows stored before it existed, and those a later
-- migration clears because PublicRecipient changed.
ALTER TABLE notifications ADD COLUMN public_search TEXT;
-- The rows Open has to fill in, found without a scan; empty otherwise.
CREATE INDEX notifications_public_search_unset ON notifications (id) WHERE public_search IS NULL;
