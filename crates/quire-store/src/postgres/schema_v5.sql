-- A held document whose name holds personal data shows a masked name until it is decided; its
-- real name waits here for the reviewer (NULL otherwise, and once decided). SQLite's
-- migration 10.
ALTER TABLE document_reviews ADD COLUMN held_name TEXT;
