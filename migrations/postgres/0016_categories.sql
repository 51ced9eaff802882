-- Categories (transactional, digest, …): a notification may name one, and a suppression may
-- hold for one category only (a one-click unsubscribe from it) rather than for every message
-- (''). The key of a suppression therefore gains the category. The log says which category
-- each change was for. The SQLite twin is migrations/sqlite/0016_categories.sql.
ALTER TABLE notifications ADD COLUMN category text;

ALTER TABLE suppressions ADD COLUMN category text NOT NULL DEFAULT '';
ALTER TABLE suppressions DROP CONSTRAINT suppressions_pkey;
ALTER TABLE suppressions ADD PRIMARY KEY (tenant, channel, recipient, category);

ALTER TABLE suppression_log ADD COLUMN category text NOT NULL DEFAULT '';
