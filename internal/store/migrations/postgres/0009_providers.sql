-- The providers of the channels that fail over along several (the email
-- channel's mail servers, the sms channel's gateways), as the workers
-- declare them at start, with the circuit state they last recorded: the
-- view every replica shares, read by the API, relay status and the
-- dashboard. Addresses and credentials stay in the workers' environment.
CREATE TABLE providers (
    channel            text NOT NULL,
    name               text NOT NULL,
    position           integer NOT NULL,
    -- The limit in messages a second, 0 for none, and its burst.
    rate               double precision NOT NULL DEFAULT 0,
    burst              integer NOT NULL DEFAULT 0,
    circuit_state      text NOT NULL DEFAULT 'closed' CHECK (circuit_state IN ('closed', 'open', 'half-open')),
    circuit_since      timestamptz,
    circuit_error      text NOT NULL DEFAULT '',
    failing_since      timestamptz,
    circuit_updated_at timestamptz,
    -- When a worker last declared it or recorded its circuit.
    seen_at            timestamptz NOT NULL,
    PRIMARY KEY (channel, name)
);
