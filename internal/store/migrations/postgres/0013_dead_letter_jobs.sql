-- Bulk replays and purges of the dead-letter queue, run as jobs (see
-- deadjob.go). The process running a job holds its lease until
-- lease_until and renews it as it goes; a running job whose lease lapsed
-- (its process died) is taken over by another API process. selection is
-- the request's selection, as JSON.
CREATE TABLE dead_letter_jobs (
    id          text PRIMARY KEY,
    action      text NOT NULL CHECK (action IN ('replay', 'purge')),
    selection   text NOT NULL,
    state       text NOT NULL CHECK (state IN ('running', 'done', 'failed', 'cancelled')),
    matched     bigint NOT NULL DEFAULT 0,
    done        bigint NOT NULL DEFAULT 0,
    failed      bigint NOT NULL DEFAULT 0,
    last_error  text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    finished_at timestamptz,
    lease_owner text NOT NULL DEFAULT '',
    lease_until timestamptz NOT NULL,
    takeovers   bigint NOT NULL DEFAULT 0
);
CREATE INDEX dead_letter_jobs_running ON dead_letter_jobs (lease_until) WHERE state = 'running';
-- The journal of a replay job: each parked copy it replayed (message id,
-- copy, source queue, the round that parked it), written after the
-- broker confirmed the replay and before the parked original is acked. A
-- job resumed after a crash acks, without replaying, a copy found here.
CREATE TABLE dead_letter_job_replays (
    job_id     text NOT NULL,
    message_id text NOT NULL,
    copy       text NOT NULL,
    source     text NOT NULL,
    round      bigint NOT NULL,
    PRIMARY KEY (job_id, message_id, copy, source, round)
);
