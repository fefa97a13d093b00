-- Progress of a document being processed (SQLite's migration 9): written by its worker at each
-- stage change and at most about once a second within a stage; read only while the document is
-- `processing`, so rows left by finished documents are never shown.
CREATE TABLE document_progress (
    document_id UUID PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    stage       TEXT NOT NULL,
    done        BIGINT,
    total       BIGINT,
    updated_at  TIMESTAMPTZ NOT NULL
);
