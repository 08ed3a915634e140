-- The provider an attempt went through, for a channel with several (the
-- email channel's mail servers): as the worker's event says it, and on
-- the attempt derived from it. '' where none was said.
ALTER TABLE events ADD COLUMN provider TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN provider TEXT NOT NULL DEFAULT '';
