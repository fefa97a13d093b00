-- Versions and external ids. A document keeps its id across versions; each version's chunks
-- are indexed (and its original stored) under the version's own `index_id` (the document's
-- id for version 1), so a new version can be indexed beside the live one and made live by one
-- transaction that changes `documents.index_id`. The version before the live one stays
-- resolvable (`previous_index_id`, its chunks kept) until the next switch, for nodes whose
-- indexes have not caught up yet.
ALTER TABLE documents ADD COLUMN external_id TEXT;
ALTER TABLE documents ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE documents ADD COLUMN index_id TEXT;
ALTER TABLE documents ADD COLUMN previous_index_id TEXT;
UPDATE documents SET index_id = id;
CREATE UNIQUE INDEX documents_by_external_id ON documents (source_id, external_id)
    WHERE external_id IS NOT NULL;
CREATE INDEX documents_by_index_id ON documents (index_id);
CREATE INDEX documents_by_previous_index_id ON documents (previous_index_id)
    WHERE previous_index_id IS NOT NULL;

-- status: queued | processing | pending_review | ready | failed | superseded.
CREATE TABLE document_versions (
    document_id  TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    index_id     TEXT NOT NULL,
    name         TEXT NOT NULL,
    size         INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    status       TEXT NOT NULL,
    error        TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (document_id, version)
);
CREATE INDEX document_versions_by_index_id ON document_versions (index_id);
INSERT INTO document_versions (document_id, version, index_id, name, size, content_type, sha256,
                               status, error, created_at, updated_at)
SELECT id, 1, id, name, size, content_type, sha256, status, error, created_at, updated_at
FROM documents;

-- The version a job processes.
ALTER TABLE jobs ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

-- The version a chunk belongs to, by its index id.
ALTER TABLE chunks ADD COLUMN index_id TEXT;
UPDATE chunks SET index_id = document_id;
CREATE INDEX chunks_by_index_id ON chunks (index_id, ordinal);
