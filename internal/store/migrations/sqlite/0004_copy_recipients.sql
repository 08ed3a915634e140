-- A copy is (notification, channel, recipient): a channel that delivers to
-- each recipient on its own (email) has one copy per recipient, delivered,
-- retried and parked on its own. recipient is '' for a copy that goes to
-- all of a part's recipients at once, as every copy before this did.
--
-- SQLite cannot change a primary key, so copies, events and attempts are
-- rebuilt. This runs in the migration's transaction with foreign keys on:
-- the old tables are renamed first, which carries attempts' foreign key
-- over to copies_old, and attempts_old is dropped before copies_old, so
-- that dropping copies_old cascades to nothing.
ALTER TABLE attempts RENAME TO attempts_old;
ALTER TABLE events RENAME TO events_old;
ALTER TABLE copies RENAME TO copies_old;
-- The indexes went with copies_old; their names are wanted again.
DROP INDEX copies_status;
DROP INDEX copies_channel_status;

-- One row per copy: the state derived from its events.
CREATE TABLE copies (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         TEXT NOT NULL,
    recipient       TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL CHECK (status IN ('queued', 'retrying', 'delivered', 'parked')),
    reason          TEXT NOT NULL DEFAULT '',
    round           INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT NOT NULL DEFAULT '',
    next_attempt_at INTEGER,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (notification_id, channel, recipient)
) WITHOUT ROWID;
-- List filtered by status, or by channel and status.
CREATE INDEX copies_status ON copies (status, notification_id);
CREATE INDEX copies_channel_status ON copies (channel, status, notification_id);

-- Every event as received, one per (copy, round, attempt, outcome).
CREATE TABLE events (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         TEXT NOT NULL,
    recipient       TEXT NOT NULL DEFAULT '',
    round           INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    outcome         TEXT NOT NULL,
    at              INTEGER NOT NULL,
    error           TEXT NOT NULL DEFAULT '',
    reason          TEXT NOT NULL DEFAULT '',
    delay_ms        INTEGER NOT NULL DEFAULT 0,
    duration_ms     INTEGER NOT NULL DEFAULT 0,
    service         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (notification_id, channel, recipient, round, attempt, outcome)
) WITHOUT ROWID;

-- The timeline of a copy: one row per (round, attempt).
CREATE TABLE attempts (
    notification_id TEXT NOT NULL,
    channel         TEXT NOT NULL,
    recipient       TEXT NOT NULL DEFAULT '',
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
    PRIMARY KEY (notification_id, channel, recipient, round, attempt),
    FOREIGN KEY (notification_id, channel, recipient) REFERENCES copies (notification_id, channel, recipient) ON DELETE CASCADE
) WITHOUT ROWID;

INSERT INTO copies (notification_id, channel, recipient, status, reason, round, attempts, last_error, next_attempt_at, updated_at)
SELECT notification_id, channel, '', status, reason, round, attempts, last_error, next_attempt_at, updated_at FROM copies_old;
INSERT INTO events (notification_id, channel, recipient, round, attempt, outcome, at, error, reason, delay_ms, duration_ms, service)
SELECT notification_id, channel, '', round, attempt, outcome, at, error, reason, delay_ms, duration_ms, service FROM events_old;
INSERT INTO attempts (notification_id, channel, recipient, round, attempt, at, outcome, error, reason, service, delay_ms, waited_ms, duration_ms)
SELECT notification_id, channel, '', round, attempt, at, outcome, error, reason, service, delay_ms, waited_ms, duration_ms FROM attempts_old;

-- The child before its parent: dropping copies_old then deletes no
-- attempt, old or new.
DROP TABLE attempts_old;
DROP TABLE events_old;
DROP TABLE copies_old;
