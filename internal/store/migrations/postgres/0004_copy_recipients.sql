-- A copy is (notification, channel, recipient): a channel that delivers to
-- each recipient on its own (email) has one copy per recipient, delivered,
-- retried and parked on its own. recipient is '' for a copy that goes to
-- all of a part's recipients at once, as every copy before this did.
--
-- Adding a column with a constant default rewrites no table; the new
-- primary keys and the foreign key are built from the rows there are.
-- Recipients use the C collation, so that copies sort byte-wise, as on
-- SQLite.
ALTER TABLE attempts DROP CONSTRAINT attempts_notification_id_channel_fkey;

ALTER TABLE copies ADD COLUMN recipient text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN recipient text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN recipient text COLLATE "C" NOT NULL DEFAULT '';

ALTER TABLE copies DROP CONSTRAINT copies_pkey,
    ADD PRIMARY KEY (notification_id, channel, recipient);
ALTER TABLE events DROP CONSTRAINT events_pkey,
    ADD PRIMARY KEY (notification_id, channel, recipient, round, attempt, outcome);
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey,
    ADD PRIMARY KEY (notification_id, channel, recipient, round, attempt),
    ADD FOREIGN KEY (notification_id, channel, recipient) REFERENCES copies (notification_id, channel, recipient) ON DELETE CASCADE;
