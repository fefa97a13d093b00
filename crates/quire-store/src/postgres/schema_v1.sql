-- The whole schema of the SQLite store's six migrations, in PostgreSQL's own types: ids are
-- UUIDs (their order is the order of their text form, which cursors rely on), times are
-- TIMESTAMPTZ, and `seq` identity columns give the insertion order SQLite's rowid gives.

CREATE TABLE sources (
    id          UUID PRIMARY KEY,
    seq         BIGINT GENERATED ALWAYS AS IDENTITY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    source_type TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE documents (
    id           UUID PRIMARY KEY,
    seq          BIGINT GENERATED ALWAYS AS IDENTITY,
    source_id    UUID NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    status       TEXT NOT NULL,
    error        TEXT,
    chunk_count  BIGINT NOT NULL DEFAULT 0,
    page_count   BIGINT NOT NULL DEFAULT 0,
    size         BIGINT NOT NULL,
    content_type TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX documents_by_source ON documents (source_id, created_at);
-- The same bytes are one document per source unless it failed: enforced here, so two nodes
-- storing one upload at once cannot both create it (INSERT … ON CONFLICT DO NOTHING).
CREATE UNIQUE INDEX documents_by_content ON documents (source_id, sha256) WHERE status <> 'failed';
CREATE INDEX documents_by_status ON documents (status, updated_at);

CREATE TABLE chunks (
    id          UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    document_id UUID NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    source_id   UUID NOT NULL,
    ordinal     BIGINT NOT NULL,
    page        BIGINT NOT NULL,
    section     TEXT NOT NULL,
    content     TEXT NOT NULL
);
CREATE INDEX chunks_by_document ON chunks (document_id, ordinal);

-- One job per document to process. state: queued | running | done | failed.
CREATE TABLE jobs (
    id               UUID PRIMARY KEY,
    seq              BIGINT GENERATED ALWAYS AS IDENTITY,
    document_id      UUID NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    kind             TEXT NOT NULL,
    state            TEXT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    run_after        TIMESTAMPTZ NOT NULL,
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ,
    last_error       TEXT,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX jobs_runnable ON jobs (created_at, seq) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_by_document ON jobs (document_id);

CREATE TABLE api_keys (
    id           UUID PRIMARY KEY,
    seq          BIGINT GENERATED ALWAYS AS IDENTITY,
    name         TEXT NOT NULL,
    permission   TEXT NOT NULL,
    all_sources  BOOLEAN NOT NULL,
    rate_limit   BIGINT,
    key_hash     TEXT NOT NULL UNIQUE,
    created_at   TIMESTAMPTZ NOT NULL,
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ
);

CREATE TABLE api_key_sources (
    key_id    UUID NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    source_id UUID NOT NULL,
    PRIMARY KEY (key_id, source_id)
);

CREATE TABLE rate_windows (
    key_id       UUID NOT NULL,
    bucket       TEXT NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    count        BIGINT NOT NULL,
    PRIMARY KEY (key_id, bucket, window_start)
);
CREATE INDEX rate_windows_by_start ON rate_windows (window_start);

-- Keys are revoked, never deleted, so a conversation keeps its owner.
CREATE TABLE conversations (
    id         UUID PRIMARY KEY,
    seq        BIGINT GENERATED ALWAYS AS IDENTITY,
    key_id     UUID NOT NULL REFERENCES api_keys (id),
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX conversations_by_key ON conversations (key_id, updated_at);

-- Questions and answers are stored as UTF-8 bytes: TEXT cannot hold U+0000, and what a user
-- typed or a model generated must come back exactly. seq orders messages of one millisecond.
CREATE TABLE messages (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              UUID NOT NULL UNIQUE,
    conversation_id UUID NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    question        BYTEA NOT NULL,
    answer          BYTEA NOT NULL,
    citations       TEXT NOT NULL,
    generator       TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, created_at, seq);

-- events is the JSON array of event names in the order registered; webhook_subscriptions
-- holds the same pairs so finishing a document finds its subscribers with one index lookup.
CREATE TABLE webhooks (
    id         UUID PRIMARY KEY,
    seq        BIGINT GENERATED ALWAYS AS IDENTITY,
    url        TEXT NOT NULL,
    events     TEXT NOT NULL,
    secret     TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE webhook_subscriptions (
    event      TEXT NOT NULL,
    webhook_id UUID NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    PRIMARY KEY (event, webhook_id)
);
CREATE INDEX webhook_subscriptions_by_webhook ON webhook_subscriptions (webhook_id);

-- One row per (webhook, event), written in the transaction that changed the document.
-- claimed_at is set when a dispatcher takes the row: a claimed row is never handed out again.
-- The body is TEXT, not JSONB: it is sent byte for byte as written.
CREATE TABLE webhook_outbox (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id   UUID NOT NULL UNIQUE,
    webhook_id UUID NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event      TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    claimed_at TIMESTAMPTZ
);
CREATE INDEX webhook_outbox_pending ON webhook_outbox (seq) WHERE claimed_at IS NULL;
CREATE INDEX webhook_outbox_by_webhook ON webhook_outbox (webhook_id);
CREATE INDEX webhook_outbox_by_event ON webhook_outbox (event_id) WHERE claimed_at IS NOT NULL;

-- The newest attempts per webhook; older ones are pruned as new ones are recorded.
CREATE TABLE webhook_deliveries (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     UUID NOT NULL,
    webhook_id   UUID NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event        TEXT NOT NULL,
    attempted_at TIMESTAMPTZ NOT NULL,
    status_code  INTEGER,
    error        TEXT,
    latency_ms   BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, seq);

-- Documents held for an administrator's review because personal data was found in them.
CREATE TABLE document_reviews (
    document_id UUID PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    pii_types   TEXT NOT NULL,   -- JSON array of type names, e.g. ["email","phone"]
    findings    TEXT NOT NULL,   -- JSON array of findings as the detector reported them
    held_at     TIMESTAMPTZ NOT NULL,
    decision    TEXT,            -- NULL while waiting; 'approve' or 'redact'
    decided_at  TIMESTAMPTZ
);
CREATE INDEX document_reviews_waiting ON document_reviews (held_at) WHERE decision IS NULL;

-- The admin web interface: exactly one password row (id = 1), holding an Argon2id PHC string.
CREATE TABLE admin_password (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    hash       TEXT NOT NULL,
    changed_at TIMESTAMPTZ NOT NULL
);
-- Sessions are looked up by the SHA-256 of the cookie's token; the token itself is not stored.
CREATE TABLE admin_sessions (
    token_hash TEXT PRIMARY KEY,
    csrf       TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX admin_sessions_by_expiry ON admin_sessions (expires_at);
CREATE TABLE audit_log (
    seq    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     TIMESTAMPTZ NOT NULL,
    action TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_log_by_time ON audit_log (at, seq);
