-- Progress of a document being processed, written by its worker at each stage change and at
-- most about once a second within a stage. One row per document, replaced in place; read only
-- while the document is `processing`, so rows left by finished documents are never shown.
CREATE TABLE document_progress (
    document_id TEXT PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    stage       TEXT NOT NULL,
    done        INTEGER,
    total       INTEGER,
    updated_at  INTEGER NOT NULL
);
