-- Categories (transactional, digest, …): a notification may name one, and a suppression may
-- hold for one category only (a one-click unsubscribe from it) rather than for every message
-- (''). The key of a suppression therefore gains the category; SQLite cannot change a primary
-- key in place, so the table is rebuilt. The log says which category each change was for. The
-- PostgreSQL twin is migrations/postgres/0016_categories.sql.
ALTER TABLE notifications ADD COLUMN category text;

CREATE TABLE suppressions_by_category (
    tenant     text NOT NULL,
    channel    text NOT NULL CHECK (channel IN ('email', 'sms', 'push', 'webhook')),
    recipient  text NOT NULL,
    category   text NOT NULL DEFAULT '',
    reason     text NOT NULL CHECK (reason IN ('bounced', 'complained', 'unsubscribed', 'manual')),
    source     text NOT NULL,
    evidence   text NOT NULL,
    note       text,
    created_at text NOT NULL,
    PRIMARY KEY (tenant, channel, recipient, category)
);
INSERT INTO suppressions_by_category
    (tenant, channel, recipient, category, reason, source, evidence, note, created_at)
    SELECT tenant, channel, recipient, '', reason, source, evidence, note, created_at
    FROM suppressions;
DROP TABLE suppressions;
ALTER TABLE suppressions_by_category RENAME TO suppressions;

ALTER TABLE suppression_log ADD COLUMN category text NOT NULL DEFAULT '';
