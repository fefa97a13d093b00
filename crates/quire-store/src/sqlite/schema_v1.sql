-- Times are Unix milliseconds (INTEGER); ids are hyphenated UUID strings.

CREATE TABLE sources (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    source_type TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE documents (
    id           TEXT PRIMARY KEY,
    source_id    TEXT NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    status       TEXT NOT NULL,
    error        TEXT,
    chunk_count  INTEGER NOT NULL DEFAULT 0,
    page_count   INTEGER NOT NULL DEFAULT 0,
    size         INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX documents_by_source ON documents (source_id, created_at);

CREATE TABLE chunks (
    id          TEXT PRIMARY KEY,
    document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    source_id   TEXT NOT NULL,
    ordinal     INTEGER NOT NULL,
    page        INTEGER NOT NULL,
    section     TEXT NOT NULL,
    content     TEXT NOT NULL
);
CREATE INDEX chunks_by_document ON chunks (document_id, ordinal);

-- One job per document to process. state: queued | running | done | failed.
CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    document_id      TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    kind             TEXT NOT NULL,
    state            TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    run_after        INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX jobs_runnable ON jobs (state, run_after, created_at);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    permission   TEXT NOT NULL,
    all_sources  INTEGER NOT NULL,
    rate_limit   INTEGER,
    key_hash     TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);

CREATE TABLE api_key_sources (
    key_id    TEXT NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    source_id TEXT NOT NULL,
    PRIMARY KEY (key_id, source_id)
);

CREATE TABLE rate_windows (
    key_id       TEXT NOT NULL,
    bucket       TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    count        INTEGER NOT NULL,
    PRIMARY KEY (key_id, bucket, window_start)
);
