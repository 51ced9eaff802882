-- Bulk resolution previews: a dry run of `POST /v1/review/resolve` stores what it showed (the
-- ids with the generation each was read at, and the outcome and filter asked for) under the
-- SHA-256 of a random token it answers; the real run applies exactly that, once, before it
-- expires. The PostgreSQL twin is migrations/postgres/0012_review_previews.sql.
CREATE TABLE review_previews (
    token_hash  blob PRIMARY KEY,
    tenant      text NOT NULL,
    principal   text NOT NULL,      -- who asked for the dry run
    request     text NOT NULL,      -- the outcome, then, force, filter and max it was made for
    items       text NOT NULL,      -- [[notification id, generation read], …]
    created_at  text NOT NULL,
    expires_at  text NOT NULL
);
-- Expired previews are deleted whenever a new one is stored.
CREATE INDEX review_previews_by_expiry ON review_previews (expires_at);
