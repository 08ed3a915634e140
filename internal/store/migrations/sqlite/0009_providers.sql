-- The providers of the channels that fail over along several (the email
-- channel's mail servers, the sms channel's gateways), as the workers
-- declare them at start, with the circuit state they last recorded: the
-- view every replica shares, read by the API, relay status and the
-- dashboard. Addresses and credentials stay in the workers' environment.
CREATE TABLE providers (
    channel            TEXT NOT NULL,
    name               TEXT NOT NULL,
    position           INTEGER NOT NULL,
    -- The limit in messages a second, 0 for none, and its burst.
    rate               REAL NOT NULL DEFAULT 0,
    burst              INTEGER NOT NULL DEFAULT 0,
    circuit_state      TEXT NOT NULL DEFAULT 'closed' CHECK (circuit_state IN ('closed', 'open', 'half-open')),
    circuit_since      INTEGER,
    circuit_error      TEXT NOT NULL DEFAULT '',
    failing_since      INTEGER,
    circuit_updated_at INTEGER,
    -- When a worker last declared it or recorded its circuit.
    seen_at            INTEGER NOT NULL,
    PRIMARY KEY (channel, name)
) WITHOUT ROWID;
