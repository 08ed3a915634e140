-- Whether a failed attempt's wait was a deferral (a rate limit's slot or
-- a downstream's Retry-After, which spends no retry): as the retry
-- stage's event says it, and on the attempt derived from it.
ALTER TABLE events ADD COLUMN deferred boolean NOT NULL DEFAULT false;
ALTER TABLE attempts ADD COLUMN deferred boolean NOT NULL DEFAULT false;
