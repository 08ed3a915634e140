-- A worker gives a copy back with how its attempt ended, in the same
-- statement: 'delivered' (the copy went out: a cancellation answers
-- delivered even while the history, fed asynchronously, still says
-- scheduled) or 'failed' (its next attempt may still be cancelled), with
-- the attempt's round and number. until is, for those and for
-- 'cancelled', when the row was written; for 'sending', when the hold
-- lapses.
ALTER TABLE copy_holds DROP CONSTRAINT copy_holds_state_check;
ALTER TABLE copy_holds ADD CONSTRAINT copy_holds_state_check
    CHECK (state IN ('sending', 'cancelled', 'delivered', 'failed'));
ALTER TABLE copy_holds ADD COLUMN round integer NOT NULL DEFAULT 0;
ALTER TABLE copy_holds ADD COLUMN attempt integer NOT NULL DEFAULT 0;
