-- Conversations with the generate endpoint. Times are Unix milliseconds (INTEGER); ids are
-- hyphenated UUID strings. Keys are revoked, never deleted, so a conversation keeps its owner.

CREATE TABLE conversations (
    id         TEXT PRIMARY KEY,
    key_id     TEXT NOT NULL REFERENCES api_keys (id),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX conversations_by_key ON conversations (key_id, updated_at);

-- seq orders messages added in the same millisecond; AUTOINCREMENT never reuses a value.
CREATE TABLE messages (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    question        TEXT NOT NULL,
    answer          TEXT NOT NULL,
    citations       TEXT NOT NULL,
    generator       TEXT NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, created_at, seq);
