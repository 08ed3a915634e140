-- Which side holds a copy of a scheduled or retried notification: a
-- worker sending it ('sending', until the time its hold lapses, in
-- microseconds since the Unix epoch) or the client that cancelled it
-- ('cancelled', for good). A worker takes the hold before it sends and a
-- cancellation before it records the copy cancelled, each in one
-- statement, so the two cannot both win: a copy a worker is sending is
-- answered as on its way, never as cancelled (see Claim and Cancel).
CREATE TABLE copy_holds (
    notification_id text NOT NULL,
    channel         text NOT NULL,
    recipient       text NOT NULL DEFAULT '',
    state           text NOT NULL CHECK (state IN ('sending', 'cancelled')),
    until           bigint NOT NULL,
    PRIMARY KEY (notification_id, channel, recipient)
);
