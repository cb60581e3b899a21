-- 0013_job_lease.sql — which serve node runs each background job (issue 22:
-- several nodes over one database). A node runs a job's round only while it
-- holds the job's lease; it renews it every round, and a node that died
-- leaves it to expire, when another node takes it over. Not per tenant: a
-- reference table (docs/scaling.md).
CREATE TABLE IF NOT EXISTS job_lease (
    name        TEXT NOT NULL PRIMARY KEY,
    holder      TEXT NOT NULL,
    until_at    TEXT NOT NULL,
    taken_at    TEXT NOT NULL
);
