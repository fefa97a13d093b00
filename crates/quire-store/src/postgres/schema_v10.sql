-- A document's metadata: a JSON object of the caller's keys and values (`{}` when none).
ALTER TABLE documents ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
