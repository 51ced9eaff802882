-- One row that readiness checks rewrite: herald is ready only while it can commit a write (a
-- full disk or a read-only file system still lets it read).
CREATE TABLE readiness (
    id integer PRIMARY KEY CHECK (id = 1),
    checked_at text NOT NULL
);
INSERT INTO readiness (id, checked_at) VALUES (1, '1970-01-01T00:00:00Z');
