-- Documents held for an administrator's review because personal data was found in them.
-- One row per held document; the decision (approve or redact) sends it back to processing.
CREATE TABLE document_reviews (
    document_id TEXT PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    pii_types   TEXT NOT NULL,   -- JSON array of type names, e.g. ["email","phone"]
    findings    TEXT NOT NULL,   -- JSON array of findings as the detector reported them
    held_at     INTEGER NOT NULL,
    decision    TEXT,            -- NULL while waiting; 'approve' or 'redact'
    decided_at  INTEGER
);
CREATE INDEX document_reviews_waiting ON document_reviews (held_at) WHERE decision IS NULL;
