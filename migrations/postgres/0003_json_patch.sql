-- SQLite's json_patch, so that statements adding evidence read the same in both dialects.
-- herald only ever adds top-level keys to an attempt's evidence, where a shallow merge and
-- SQLite's merge patch agree.
CREATE FUNCTION json_patch(target jsonb, patch jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS 'SELECT target || patch';
