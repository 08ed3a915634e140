-- Whether a failed attempt's wait was a deferral (a rate limit's slot or
-- a downstream's Retry-After, which spends no retry): as the retry
-- stage's event says it, and on the attempt derived from it. 0 or 1.
ALTER TABLE events ADD COLUMN deferred INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN deferred INTEGER NOT NULL DEFAULT 0;
