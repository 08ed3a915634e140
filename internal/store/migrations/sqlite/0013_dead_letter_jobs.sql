-- Bulk replays and purges of the dead-letter queue, run as jobs (see
-- deadjob.go). The process running a job holds its lease until
-- lease_until and renews it as it goes; a running job whose lease lapsed
-- (its process died) is taken over by another API process. selection is
-- the request's selection, as JSON. Times are microseconds since the
-- Unix epoch.
CREATE TABLE dead_letter_jobs (
    id          TEXT PRIMARY KEY,
    action      TEXT NOT NULL CHECK (action IN ('replay', 'purge')),
    selection   TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('running', 'done', 'failed', 'cancelled')),
    matched     INTEGER NOT NULL DEFAULT 0,
    done        INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    finished_at INTEGER,
    lease_owner TEXT NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL,
    takeovers   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX dead_letter_jobs_running ON dead_letter_jobs (lease_until) WHERE state = 'running';
-- The journal of a replay job: each parked copy it replayed (message id,
-- copy, source queue, the round that parked it), written after the
-- broker confirmed the replay and before the parked original is acked. A
-- job resumed after a crash acks, without replaying, a copy found here.
CREATE TABLE dead_letter_job_replays (
    job_id     TEXT NOT NULL,
    message_id TEXT NOT NULL,
    copy       TEXT NOT NULL,
    source     TEXT NOT NULL,
    round      INTEGER NOT NULL,
    PRIMARY KEY (job_id, message_id, copy, source, round)
) WITHOUT ROWID;
