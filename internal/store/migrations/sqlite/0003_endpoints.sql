-- Webhook endpoints: where a notification that names one is delivered,
-- the secrets it is signed with, and the circuit state the webhook
-- workers last recorded. Secrets are kept as given: the API returns them
-- only when it makes one (creation, rotation), and nothing logs them.
CREATE TABLE endpoints (
    id                 TEXT PRIMARY KEY,
    url                TEXT NOT NULL,
    description        TEXT NOT NULL DEFAULT '',
    enabled            INTEGER NOT NULL DEFAULT 1,
    disabled_reason    TEXT NOT NULL DEFAULT '',
    disabled_at        INTEGER,
    secret             TEXT NOT NULL,
    -- During a rotation's grace period, the secret before it, which
    -- deliveries are signed with as well until previous_until.
    previous_secret    TEXT NOT NULL DEFAULT '',
    previous_until     INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    -- When the endpoint was last re-enabled: workers forget their circuit
    -- state from before it.
    reset_at           INTEGER,
    circuit_state      TEXT NOT NULL DEFAULT 'closed' CHECK (circuit_state IN ('closed', 'open', 'half-open')),
    circuit_since      INTEGER,
    circuit_error      TEXT NOT NULL DEFAULT '',
    -- The first failure of the current run of failures, NULL after a
    -- delivery: what the workers disable an endpoint by.
    failing_since      INTEGER,
    circuit_updated_at INTEGER
);
-- ListEndpoints: newest first, keyset pagination.
CREATE INDEX endpoints_created_at_id ON endpoints (created_at, id);

-- Which notifications name which endpoint, for an endpoint's delivery
-- log: kept by the triggers below from the recipients Accept stores (a
-- webhook part that names an endpoint has its id as recipient), and
-- pruned with the notifications.
CREATE TABLE endpoint_notifications (
    endpoint_id     TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    PRIMARY KEY (endpoint_id, created_at, notification_id)
) WITHOUT ROWID;
-- The foreign key's cascade looks rows up by notification.
CREATE INDEX endpoint_notifications_notification_id ON endpoint_notifications (notification_id);

-- The WHEN clauses keep notifications that name no endpoint, nearly all,
-- from paying for more than one instr: search holds the recipients one a
-- line, lower-cased.
CREATE TRIGGER notifications_endpoints_insert AFTER INSERT ON notifications
WHEN instr(NEW.search, char(10) || 'ep_') > 0
BEGIN
    INSERT OR IGNORE INTO endpoint_notifications (endpoint_id, created_at, notification_id)
    SELECT value, NEW.created_at, NEW.id FROM json_each(NEW.recipients)
    WHERE type = 'text' AND length(value) = 29
      AND value GLOB 'ep_[a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7]';
END;

CREATE TRIGGER notifications_endpoints_update AFTER UPDATE OF recipients, created_at ON notifications
WHEN instr(NEW.search, char(10) || 'ep_') > 0 OR instr(OLD.search, char(10) || 'ep_') > 0
BEGIN
    DELETE FROM endpoint_notifications WHERE notification_id = OLD.id;
    INSERT OR IGNORE INTO endpoint_notifications (endpoint_id, created_at, notification_id)
    SELECT value, NEW.created_at, NEW.id FROM json_each(NEW.recipients)
    WHERE type = 'text' AND length(value) = 29
      AND value GLOB 'ep_[a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7]';
END;

-- Notifications accepted before this migration.
INSERT OR IGNORE INTO endpoint_notifications (endpoint_id, created_at, notification_id)
SELECT j.value, n.created_at, n.id FROM notifications n, json_each(n.recipients) j
WHERE instr(n.search, char(10) || 'ep_') > 0 AND j.type = 'text' AND length(j.value) = 29
  AND j.value GLOB 'ep_[a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7][a-z2-7]';
