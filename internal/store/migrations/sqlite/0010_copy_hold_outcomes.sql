-- A worker gives a copy back with how its attempt ended, in the same
-- statement: 'delivered' (the copy went out: a cancellation answers
-- delivered even while the history, fed asynchronously, still says
-- scheduled) or 'failed' (its next attempt may still be cancelled), with
-- the attempt's round and number. until is, for those and for
-- 'cancelled', when the row was written; for 'sending', when the hold
-- lapses. SQLite cannot change a CHECK constraint: the table is made
-- again.
CREATE TABLE copy_holds_next (
    notification_id TEXT NOT NULL,
    channel         TEXT NOT NULL,
    recipient       TEXT NOT NULL DEFAULT '',
    state           TEXT NOT NULL CHECK (state IN ('sending', 'cancelled', 'delivered', 'failed')),
    until           INTEGER NOT NULL,
    round           INTEGER NOT NULL DEFAULT 0,
    attempt         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (notification_id, channel, recipient)
) WITHOUT ROWID;
INSERT INTO copy_holds_next (notification_id, channel, recipient, state, until)
    SELECT notification_id, channel, recipient, state, until FROM copy_holds;
DROP TABLE copy_holds;
ALTER TABLE copy_holds_next RENAME TO copy_holds;
