-- The chat channel: a message to a team's chat channel (a Slack channel id as the recipient).
-- Notifications and suppressions may now name it. The SQLite twin is
-- migrations/sqlite/0021_chat.sql.
ALTER TABLE notifications
    DROP CONSTRAINT notifications_channel_check,
    ADD CONSTRAINT notifications_channel_check
        CHECK (channel IN ('email', 'sms', 'push', 'webhook', 'chat'));

ALTER TABLE suppressions
    DROP CONSTRAINT suppressions_channel_check,
    ADD CONSTRAINT suppressions_channel_check
        CHECK (channel IN ('email', 'sms', 'push', 'webhook', 'chat'));
