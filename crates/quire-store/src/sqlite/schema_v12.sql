-- Who did what the audit log records: an API key, the admin session or the command line's
-- operator (the use case that acts writes it). Entries from before it name nobody.
ALTER TABLE audit_log ADD COLUMN actor TEXT NOT NULL DEFAULT '';
