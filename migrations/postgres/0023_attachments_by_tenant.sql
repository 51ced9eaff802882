-- Each tenant's attachments are its own rows. Stored once across tenants, a file another tenant
-- had already sent was enqueued measurably faster (its content was not written again), so a
-- tenant could confirm that another had sent a given document. A file is now stored once per
-- tenant, by its SHA-256, however many of that tenant's notifications carry it; a send reads
-- the content by its SHA-256 alone, which names the same bytes whoever stored them.
--
-- Files that no notification names are left behind (retention would delete them anyway). The
-- SQLite twin is migrations/sqlite/0023_attachments_by_tenant.sql.
CREATE TABLE tenant_attachments (
    tenant       text NOT NULL,
    sha256       text NOT NULL,
    content      bytea NOT NULL,
    last_used_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, sha256)
);

INSERT INTO tenant_attachments (tenant, sha256, content, last_used_at)
SELECT t.tenant, a.sha256, a.content, a.last_used_at
FROM attachments a
JOIN (SELECT DISTINCT n.tenant, na.sha256
      FROM notification_attachments na JOIN notifications n ON n.id = na.notification_id) t
  ON t.sha256 = a.sha256;

CREATE TABLE tenant_notification_attachments (
    notification_id uuid NOT NULL REFERENCES notifications (id),
    tenant          text NOT NULL,
    sha256          text NOT NULL,
    PRIMARY KEY (notification_id, sha256),
    FOREIGN KEY (tenant, sha256) REFERENCES tenant_attachments (tenant, sha256)
);

INSERT INTO tenant_notification_attachments (notification_id, tenant, sha256)
SELECT na.notification_id, n.tenant, na.sha256
FROM notification_attachments na JOIN notifications n ON n.id = na.notification_id;

DROP TABLE notification_attachments;
DROP TABLE attachments;
ALTER TABLE tenant_attachments RENAME TO attachments;
ALTER TABLE tenant_notification_attachments RENAME TO notification_attachments;
ALTER TABLE attachments RENAME CONSTRAINT tenant_attachments_pkey TO attachments_pkey;
ALTER TABLE notification_attachments
    RENAME CONSTRAINT tenant_notification_attachments_pkey TO notification_attachments_pkey;

-- The sweep's "does any of the tenant's notifications still name this file"; a send's read of a
-- content by its SHA-256 alone.
CREATE INDEX notification_attachments_by_file ON notification_attachments (tenant, sha256);
CREATE INDEX attachments_by_sha256 ON attachments (sha256);
