-- Each dead-letter job acts on the parked copies of the tenant it was
-- created for (tenant, '' for the default tenant), or, when an operator
-- chose no tenant, on every tenant's (tenant NULL). Only that tenant's
-- tokens and the operators see the job; a process that takes it over
-- keeps it to the same copies. Jobs stored before tenants existed are
-- the default tenant's, as everything was then.
ALTER TABLE dead_letter_jobs ADD COLUMN tenant TEXT DEFAULT '';
