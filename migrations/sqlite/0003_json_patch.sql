-- SQLite has json_patch built in; the PostgreSQL twin of this migration defines it there, so
-- that statements adding evidence read the same in both dialects. Nothing to do here.
SELECT 1;
