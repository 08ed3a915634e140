-- Rate limits shared by every worker replica (see rate.go). A limit is a
-- GCRA cell: tat is its theoretical arrival time, in microseconds since
-- the Unix epoch. A ticket is a send that was told to come back at slot:
-- it holds that slot, so it is neither counted twice nor overtaken.
CREATE TABLE rate_limits (
    key TEXT PRIMARY KEY,
    tat INTEGER NOT NULL
);
CREATE TABLE rate_tickets (
    key    TEXT NOT NULL,
    ticket TEXT NOT NULL,
    slot   INTEGER NOT NULL,
    PRIMARY KEY (key, ticket)
);
CREATE INDEX rate_tickets_slot ON rate_tickets (key, slot);
