-- Email attachments. A content is stored once, by its SHA-256, however many notifications carry
-- it (a file sent to 10,000 recipients is one row); each notification names its files in
-- notification_attachments. A stored provider request holds a placeholder for each file, which
-- the sender expands just before a call, so a replay sends the same bytes.
--
-- Retention deletes a file once no notification names it and its last enqueue is older than
-- the notifications it deletes. The PostgreSQL twin is migrations/postgres/0018_attachments.sql.
CREATE TABLE attachments (
    sha256       text PRIMARY KEY,
    content      blob NOT NULL,
    last_used_at text NOT NULL
);

CREATE TABLE notification_attachments (
    notification_id blob NOT NULL REFERENCES notifications (id),
    sha256          text NOT NULL REFERENCES attachments (sha256),
    PRIMARY KEY (notification_id, sha256)
);

CREATE INDEX notification_attachments_by_file ON notification_attachments (sha256);
