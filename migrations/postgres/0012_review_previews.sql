-- Bulk resolution previews: a dry run of `POST /v1/review/resolve` stores what it showed (the
-- ids with the generation each was read at, and the outcome and filter asked for) under the
-- SHA-256 of a random token it answers; the real run applies exactly that, once, before it
-- expires. Kept in the database so that any herald process sharing it can confirm a preview
-- another one made. The SQLite twin is migrations/sqlite/0012_review_previews.sql.
CREATE TABLE review_previews (
    token_hash  bytea PRIMARY KEY,
    tenant      text NOT NULL,
    principal   text NOT NULL,      -- who asked for the dry run
    request     jsonb NOT NULL,     -- the outcome, then, force, filter and max it was made for
    items       jsonb NOT NULL,     -- [[notification id, generation read], …]
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
-- Expired previews are deleted whenever a new one is stored.
CREATE INDEX review_previews_by_expiry ON review_previews (expires_at);
