-- Webhook endpoints: where a notification that names one is delivered,
-- the secrets it is signed with, and the circuit state the webhook
-- workers last recorded. Secrets are kept as given: the API returns them
-- only when it makes one (creation, rotation), and nothing logs them.
CREATE TABLE endpoints (
    id                 text COLLATE "C" PRIMARY KEY,
    url                text NOT NULL,
    description        text NOT NULL DEFAULT '',
    enabled            boolean NOT NULL DEFAULT true,
    disabled_reason    text NOT NULL DEFAULT '',
    disabled_at        timestamptz,
    secret             text NOT NULL,
    -- During a rotation's grace period, the secret before it, which
    -- deliveries are signed with as well until previous_until.
    previous_secret    text NOT NULL DEFAULT '',
    previous_until     timestamptz,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    -- When the endpoint was last re-enabled: workers forget their circuit
    -- state from before it.
    reset_at           timestamptz,
    circuit_state      text NOT NULL DEFAULT 'closed' CHECK (circuit_state IN ('closed', 'open', 'half-open')),
    circuit_since      timestamptz,
    circuit_error      text NOT NULL DEFAULT '',
    -- The first failure of the current run of failures, NULL after a
    -- delivery: what the workers disable an endpoint by.
    failing_since      timestamptz,
    circuit_updated_at timestamptz
);
-- ListEndpoints: newest first, keyset pagination.
CREATE INDEX endpoints_created_at_id ON endpoints (created_at, id);

-- Which notifications name which endpoint, for an endpoint's delivery
-- log: kept by the trigger below from the recipients Accept stores (a
-- webhook part that names an endpoint has its id as recipient), and
-- pruned with the notifications.
CREATE TABLE endpoint_notifications (
    endpoint_id     text COLLATE "C" NOT NULL,
    created_at      timestamptz NOT NULL,
    notification_id text COLLATE "C" NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    PRIMARY KEY (endpoint_id, created_at, notification_id)
);
-- The foreign key's cascade looks rows up by notification.
CREATE INDEX endpoint_notifications_notification_id ON endpoint_notifications (notification_id);

CREATE FUNCTION notifications_endpoints() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM endpoint_notifications WHERE notification_id = OLD.id;
    END IF;
    INSERT INTO endpoint_notifications (endpoint_id, created_at, notification_id)
    SELECT DISTINCT r, NEW.created_at, NEW.id FROM jsonb_array_elements_text(NEW.recipients) AS r
    WHERE r ~ '^ep_[a-z2-7]{26}$'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

-- The WHEN clauses keep notifications that name no endpoint, nearly all,
-- from calling the function: search holds the recipients one a line,
-- lower-cased.
CREATE TRIGGER notifications_endpoints_insert AFTER INSERT ON notifications
FOR EACH ROW WHEN (strpos(NEW.search, E'\nep_') > 0)
EXECUTE FUNCTION notifications_endpoints();

CREATE TRIGGER notifications_endpoints_update AFTER UPDATE OF recipients, created_at ON notifications
FOR EACH ROW WHEN (strpos(NEW.search, E'\nep_') > 0 OR strpos(OLD.search, E'\nep_') > 0)
EXECUTE FUNCTION notifications_endpoints();

-- Notifications accepted before this migration.
INSERT INTO endpoint_notifications (endpoint_id, created_at, notification_id)
SELECT DISTINCT r, n.created_at, n.id FROM notifications n, jsonb_array_elements_text(n.recipients) AS r
WHERE strpos(n.search, E'\nep_') > 0 AND r ~ '^ep_[a-z2-7]{26}$'
ON CONFLICT DO NOTHING;
