-- An operator's pause may send the route's work to its fallback rather than hold it: the
-- pause and its audit record say which. The SQLite twin is
-- migrations/sqlite/0019_pause_to_fallback.sql.
ALTER TABLE route_pauses ADD COLUMN to_fallback boolean NOT NULL DEFAULT false;
ALTER TABLE route_pause_log ADD COLUMN to_fallback boolean NOT NULL DEFAULT false;
