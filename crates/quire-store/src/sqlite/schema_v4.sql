-- Webhooks, their transactional outbox and their delivery log. Times are Unix milliseconds
-- (INTEGER); ids are hyphenated UUID strings.

-- events is the JSON array of event names in the order registered; webhook_subscriptions
-- holds the same pairs so finishing a document finds its subscribers with one index lookup.
CREATE TABLE webhooks (
    id         TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    events     TEXT NOT NULL,
    secret     TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE webhook_subscriptions (
    event      TEXT NOT NULL,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    PRIMARY KEY (event, webhook_id)
) WITHOUT ROWID;
CREATE INDEX webhook_subscriptions_by_webhook ON webhook_subscriptions (webhook_id);

-- One row per (webhook, event), written in the transaction that changed the document.
-- claimed_at is set when a dispatcher takes the row: a claimed row is never handed out again,
-- so each event is attempted at most once. seq gives the delivery order; AUTOINCREMENT never
-- reuses a value.
CREATE TABLE webhook_outbox (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id   TEXT NOT NULL UNIQUE,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event      TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    claimed_at INTEGER
);
CREATE INDEX webhook_outbox_pending ON webhook_outbox (seq) WHERE claimed_at IS NULL;
CREATE INDEX webhook_outbox_by_webhook ON webhook_outbox (webhook_id);

-- The newest attempts per webhook; older ones are pruned as new ones are recorded.
CREATE TABLE webhook_deliveries (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id     TEXT NOT NULL,
    webhook_id   TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event        TEXT NOT NULL,
    attempted_at INTEGER NOT NULL,
    status_code  INTEGER,
    error        TEXT,
    latency_ms   INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, seq);
