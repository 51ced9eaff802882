-- One row that readiness checks rewrite: herald is ready only while it can commit a write (a
-- full disk or a standby in recovery still lets it read).
CREATE TABLE readiness (
    id integer PRIMARY KEY CHECK (id = 1),
    checked_at timestamptz NOT NULL
);
INSERT INTO readiness (id, checked_at) VALUES (1, '1970-01-01T00:00:00Z');
