-- Email attachments. A content is stored once, by its SHA-256, however many notifications carry
-- it (a file sent to 10,000 recipients is one row); each notification names its files in
-- notification_attachments. A stored provider request holds a placeholder for each file, which
-- the sender expands just before a call, so a replay sends the same bytes.
--
-- Retention deletes a file once no notification names it and its last enqueue is older than
-- the notifications it deletes: an enqueue that names a file sets `last_used_at` under the
-- file's row lock, so a concurrent sweep rechecks that time and leaves the file. The SQLite
-- twin is migrations/sqlite/0018_attachments.sql.
CREATE TABLE attachments (
    sha256       text PRIMARY KEY,
    content      bytea NOT NULL,
    last_used_at timestamptz NOT NULL
);

CREATE TABLE notification_attachments (
    notification_id uuid NOT NULL REFERENCES notifications (id),
    sha256          text NOT NULL REFERENCES attachments (sha256),
    PRIMARY KEY (notification_id, sha256)
);

-- The sweep's "does any notification still name this file".
CREATE INDEX notification_attachments_by_file ON notification_attachments (sha256);
