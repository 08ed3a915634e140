-- Times are INTEGER microseconds since the Unix epoch, UTC: they sort and
-- compare as numbers and round-trip exactly. JSON columns are TEXT.

-- The notifications the API accepted, and placeholders for those whose
-- events arrived first (accepted = 0 until Accept fills them in).
CREATE TABLE notifications (
    id          TEXT PRIMARY KEY,
    created_at  INTEGER NOT NULL,
    accepted    INTEGER NOT NULL DEFAULT 0,
    channels    TEXT NOT NULL DEFAULT '[]',
    recipients  TEXT NOT NULL DEFAULT '[]',
    -- search is what List's Search looks in, lower-cased: the id on the
    -- first line, then the recipients, one per line.
    search      TEXT NOT NULL DEFAULT '',
    payload     TEXT
);
-- List: newest first, keyset pagination, since/until ranges, Prune.
CREATE INDEX notifications_created_at_id ON notifications (created_at, id);

-- One row per channel copy: the state derived from its events.
CREATE TABLE copies (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('queued', 'retrying', 'delivered', 'parked')),
    reason          TEXT NOT NULL DEFAULT '',
    round           INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT NOT NULL DEFAULT '',
    next_attempt_at INTEGER,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (notification_id, channel)
) WITHOUT ROWID;
-- List filtered by status, or by channel and status.
CREATE INDEX copies_status ON copies (status, notification_id);
CREATE INDEX copies_channel_status ON copies (channel, status, notification_id);

-- Every event as received, one per (copy, round, attempt, outcome): the
-- source the copies and attempts are derived from, whatever the order
-- the events arrived in.
CREATE TABLE events (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         TEXT NOT NULL,
    round           INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    outcome         TEXT NOT NULL,
    at              INTEGER NOT NULL,
    error           TEXT NOT NULL DEFAULT '',
    reason          TEXT NOT NULL DEFAULT '',
    delay_ms        INTEGER NOT NULL DEFAULT 0,
    duration_ms     INTEGER NOT NULL DEFAULT 0,
    service         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (notification_id, channel, round, attempt, outcome)
) WITHOUT ROWID;

-- The timeline of a copy: one row per (round, attempt); attempt 0 marks
-- the replay that started its round.
CREATE TABLE attempts (
    notification_id TEXT NOT NULL,
    channel         TEXT NOT NULL,
    round           INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    at              INTEGER NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('delivered', 'failed', 'parked', 'replayed')),
    error           TEXT NOT NULL DEFAULT '',
    reason          TEXT NOT NULL DEFAULT '',
    service         TEXT NOT NULL DEFAULT '',
    delay_ms        INTEGER,
    waited_ms       INTEGER,
    duration_ms     INTEGER,
    PRIMARY KEY (notification_id, channel, round, attempt),
    FOREIGN KEY (notification_id, channel) REFERENCES copies (notification_id, channel) ON DELETE CASCADE
) WITHOUT ROWID;

-- Idempotency-Key claims.
CREATE TABLE idempotency_keys (
    scope           TEXT NOT NULL,
    key             TEXT NOT NULL,
    fingerprint     BLOB NOT NULL,
    notification_id TEXT NOT NULL,
    response        BLOB,
    done            INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
