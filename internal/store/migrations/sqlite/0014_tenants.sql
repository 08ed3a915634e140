-- Each notification and endpoint belongs to a tenant: the tenant of the
-- token that posted or registered it, '' for the default tenant (every
-- row stored before tenants existed). A tenant's token reads and changes
-- only its own; its lists walk the index below.
ALTER TABLE notifications ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
CREATE INDEX notifications_tenant_created_at_id ON notifications (tenant, created_at, id);
ALTER TABLE endpoints ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
CREATE INDEX endpoints_tenant_created_at_id ON endpoints (tenant, created_at, id);
