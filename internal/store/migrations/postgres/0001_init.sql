-- The notifications the API accepted, and placeholders for those whose
-- events arrived first (accepted = false until Accept fills them in).
-- Ids use the C collation so that the primary key serves id-prefix LIKE
-- searches and orders byte-wise, as on SQLite.
CREATE TABLE notifications (
    id          text COLLATE "C" PRIMARY KEY,
    created_at  timestamptz NOT NULL,
    accepted    boolean NOT NULL DEFAULT false,
    channels    jsonb NOT NULL DEFAULT '[]',
    recipients  jsonb NOT NULL DEFAULT '[]',
    -- search is what List's Search looks in, lower-cased: the id on the
    -- first line, then the recipients, one per line.
    search      text NOT NULL DEFAULT '',
    payload     json
);
-- List: newest first, keyset pagination, since/until ranges, Prune.
CREATE INDEX notifications_created_at_id ON notifications (created_at, id);

-- One row per channel copy: the state derived from its events.
CREATE TABLE copies (
    notification_id text COLLATE "C" NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         text NOT NULL,
    status          text NOT NULL CHECK (status IN ('queued', 'retrying', 'delivered', 'parked')),
    reason          text NOT NULL DEFAULT '',
    round           integer NOT NULL DEFAULT 0,
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text NOT NULL DEFAULT '',
    next_attempt_at timestamptz,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (notification_id, channel)
);
-- List filtered by status, or by channel and status.
CREATE INDEX copies_status ON copies (status, notification_id);
CREATE INDEX copies_channel_status ON copies (channel, status, notification_id);

-- Every event as received, one per (copy, round, attempt, outcome): the
-- source the copies and attempts are derived from, whatever the order
-- the events arrived in.
CREATE TABLE events (
    notification_id text COLLATE "C" NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         text NOT NULL,
    round           integer NOT NULL,
    attempt         integer NOT NULL,
    outcome         text NOT NULL,
    at              timestamptz NOT NULL,
    -- Byte-wise collation: of two copies of an event that differ, the
    -- store keeps the smaller, compared as Go compares strings.
    error           text COLLATE "C" NOT NULL DEFAULT '',
    reason          text COLLATE "C" NOT NULL DEFAULT '',
    delay_ms        bigint NOT NULL DEFAULT 0,
    duration_ms     bigint NOT NULL DEFAULT 0,
    service         text COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (notification_id, channel, round, attempt, outcome)
);

-- The timeline of a copy: one row per (round, attempt); attempt 0 marks
-- the replay that started its round.
CREATE TABLE attempts (
    notification_id text COLLATE "C" NOT NULL,
    channel         text NOT NULL,
    round           integer NOT NULL,
    attempt         integer NOT NULL,
    at              timestamptz NOT NULL,
    outcome         text NOT NULL CHECK (outcome IN ('delivered', 'failed', 'parked', 'replayed')),
    error           text NOT NULL DEFAULT '',
    reason          text NOT NULL DEFAULT '',
    service         text NOT NULL DEFAULT '',
    delay_ms        bigint,
    waited_ms       bigint,
    duration_ms     bigint,
    PRIMARY KEY (notification_id, channel, round, attempt),
    FOREIGN KEY (notification_id, channel) REFERENCES copies (notification_id, channel) ON DELETE CASCADE
);

-- Idempotency-Key claims.
CREATE TABLE idempotency_keys (
    scope           text NOT NULL,
    key             text NOT NULL,
    fingerprint     bytea NOT NULL,
    notification_id text NOT NULL,
    response        bytea,
    done            boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
