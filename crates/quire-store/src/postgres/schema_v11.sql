-- Versions and external ids; see the SQLite store's schema_v14.sql for the design.
ALTER TABLE documents ADD COLUMN external_id TEXT;
ALTER TABLE documents ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE documents ADD COLUMN index_id UUID;
ALTER TABLE documents ADD COLUMN previous_index_id UUID;
UPDATE documents SET index_id = id;
ALTER TABLE documents ALTER COLUMN index_id SET NOT NULL;
CREATE UNIQUE INDEX documents_by_external_id ON documents (source_id, external_id)
    WHERE external_id IS NOT NULL;
CREATE INDEX documents_by_index_id ON documents (index_id);
CREATE INDEX documents_by_previous_index_id ON documents (previous_index_id)
    WHERE previous_index_id IS NOT NULL;
-- Deduplication by content is now checked under the source's row lock, and only for documents
-- without an external id: a new version may carry bytes another document has.
DROP INDEX documents_by_content;
CREATE INDEX documents_by_content ON documents (source_id, sha256);

CREATE TABLE document_versions (
    document_id  UUID NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    index_id     UUID NOT NULL,
    name         TEXT NOT NULL,
    size         BIGINT NOT NULL,
    content_type TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    status       TEXT NOT NULL,
    error        TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (document_id, version)
);
CREATE INDEX document_versions_by_index_id ON document_versions (index_id);
INSERT INTO document_versions (document_id, version, index_id, name, size, content_type, sha256,
                               status, error, created_at, updated_at)
SELECT id, 1, id, name, size, content_type, sha256, status, error, created_at, updated_at
FROM documents;

ALTER TABLE jobs ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

ALTER TABLE chunks ADD COLUMN index_id UUID;
UPDATE chunks SET index_id = document_id;
ALTER TABLE chunks ALTER COLUMN index_id SET NOT NULL;
CREATE INDEX chunks_by_index_id ON chunks (index_id, ordinal);

-- The stored vectors are the live version's, under its index id.
ALTER TABLE document_vectors ADD COLUMN index_id UUID;
UPDATE document_vectors SET index_id = document_id;
ALTER TABLE document_vectors ALTER COLUMN index_id SET NOT NULL;
CREATE INDEX document_vectors_by_index_id ON document_vectors (index_id);

-- A ready change names the version's index id and the one it replaces; a removal, every index
-- id the document's entries may be under.
ALTER TABLE index_feed ADD COLUMN index_id UUID;
ALTER TABLE index_feed ADD COLUMN replaced UUID;
