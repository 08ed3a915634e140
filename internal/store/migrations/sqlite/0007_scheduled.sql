-- Scheduled sends: a notification may be due later than it was accepted
-- (due_at, NULL for one sent at once); a copy is 'scheduled' until then,
-- and 'cancelled' when its notification was taken back before it went out,
-- which is also the outcome of the attempt that found it cancelled.
--
-- SQLite cannot change a CHECK constraint, so copies and attempts are
-- rebuilt, as in 0004: the tables are renamed first (attempts' foreign key
-- follows copies to copies_old), attempts_old is dropped before copies_old.
ALTER TABLE notifications ADD COLUMN due_at INTEGER;

ALTER TABLE attempts RENAME TO attempts_old;
ALTER TABLE copies RENAME TO copies_old;
DROP INDEX copies_status;
DROP INDEX copies_channel_status;

CREATE TABLE copies (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         TEXT NOT NULL,
    recipient       TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL CHECK (status IN ('scheduled', 'queued', 'retrying', 'delivered', 'parked', 'cancelled')),
    reason          TEXT NOT NULL DEFAULT '',
    round           INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT NOT NULL DEFAULT '',
    next_attempt_at INTEGER,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (notification_id, channel, recipient)
) WITHOUT ROWID;
CREATE INDEX copies_status ON copies (status, notification_id);
CREATE INDEX copies_channel_status ON copies (channel, status, notification_id);

CREATE TABLE attempts (
    notification_id TEXT NOT NULL,
    channel         TEXT NOT NULL,
    recipient       TEXT NOT NULL DEFAULT '',
    round           INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    at              INTEGER NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('delivered', 'failed', 'parked', 'replayed', 'cancelled')),
    error           TEXT NOT NULL DEFAULT '',
    reason          TEXT NOT NULL DEFAULT '',
    service         TEXT NOT NULL DEFAULT '',
    delay_ms        INTEGER,
    waited_ms       INTEGER,
    duration_ms     INTEGER,
    provider        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (notification_id, channel, recipient, round, attempt),
    FOREIGN KEY (notification_id, channel, recipient) REFERENCES copies (notification_id, channel, recipient) ON DELETE CASCADE
) WITHOUT ROWID;

INSERT INTO copies (notification_id, channel, recipient, status, reason, round, attempts, last_error, next_attempt_at, updated_at)
SELECT notification_id, channel, recipient, status, reason, round, attempts, last_error, next_attempt_at, updated_at FROM copies_old;
INSERT INTO attempts (notification_id, channel, recipient, round, attempt, at, outcome, error, reason, service, delay_ms, waited_ms, duration_ms, provider)
SELECT notification_id, channel, recipient, round, attempt, at, outcome, error, reason, service, delay_ms, waited_ms, duration_ms, provider FROM attempts_old;

DROP TABLE attempts_old;
DROP TABLE copies_old;
