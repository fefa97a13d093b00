-- The admin web interface: its one password, its sign-in sessions and the audit log.
-- Exactly one password row (id = 1); only an Argon2id PHC string is stored.
CREATE TABLE admin_password (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    hash       TEXT NOT NULL,
    changed_at INTEGER NOT NULL
);
-- Sessions are looked up by the SHA-256 of the cookie's token; the token itself is not stored.
CREATE TABLE admin_sessions (
    token_hash TEXT PRIMARY KEY,
    csrf       TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX admin_sessions_by_expiry ON admin_sessions (expires_at);
CREATE TABLE audit_log (
    at     INTEGER NOT NULL,
    action TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_log_by_time ON audit_log (at);
