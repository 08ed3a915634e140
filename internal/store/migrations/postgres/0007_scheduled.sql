-- Scheduled sends: a notification may be due later than it was accepted
-- (due_at, NULL for one sent at once); a copy is 'scheduled' until then,
-- and 'cancelled' when its notification was taken back before it went out,
-- which is also the outcome of the attempt that found it cancelled.
ALTER TABLE notifications ADD COLUMN due_at timestamptz;

ALTER TABLE copies DROP CONSTRAINT copies_status_check,
    ADD CONSTRAINT copies_status_check CHECK (status IN ('scheduled', 'queued', 'retrying', 'delivered', 'parked', 'cancelled'));
ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check,
    ADD CONSTRAINT attempts_outcome_check CHECK (outcome IN ('delivered', 'failed', 'parked', 'replayed', 'cancelled'));
