-- An operator's pause of a route (POST /v1/routes/{name}/pause): while a row stands, no process
-- claims the route's work or starts a call on it; each reads this table every half second. The
-- log keeps who paused and resumed which route, when and why. The PostgreSQL twin is
-- migrations/postgres/0017_route_pauses.sql.
CREATE TABLE route_pauses (
    route     text PRIMARY KEY,
    principal text NOT NULL,
    note      text NOT NULL,
    paused_at text NOT NULL
);

CREATE TABLE route_pause_log (
    seq       integer PRIMARY KEY AUTOINCREMENT,
    route     text NOT NULL,
    action    text NOT NULL CHECK (action IN ('paused', 'resumed')),
    principal text NOT NULL,
    note      text NOT NULL,
    at        text NOT NULL
);
