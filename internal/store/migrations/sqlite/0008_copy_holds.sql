-- Which side holds a copy of a scheduled or retried notification: a
-- worker sending it ('sending', until the time its hold lapses, in
-- microseconds since the Unix epoch) or the client that cancelled it
-- ('cancelled', for good). A worker takes the hold before it sends and a
-- cancellation before it records the copy cancelled, each in one
-- statement, so the two cannot both win: a copy a worker is sending is
-- answered as on its way, never as cancelled (see Claim and Cancel).
CREATE TABLE copy_holds (
    notification_id TEXT NOT NULL,
    channel         TEXT NOT NULL,
    recipient       TEXT NOT NULL DEFAULT '',
    state           TEXT NOT NULL CHECK (state IN ('sending', 'cancelled')),
    until           INTEGER NOT NULL,
    PRIMARY KEY (notification_id, channel, recipient)
) WITHOUT ROWID;
