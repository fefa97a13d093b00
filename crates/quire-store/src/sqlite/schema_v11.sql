-- The queue in claim order. A claim takes the oldest runnable job; with the runnable rows
-- found through `jobs_runnable` (two ranges, queued and running), SQLite sorted every queued
-- job to find it, about a millisecond for 5,000 queued jobs and the write lock held meanwhile.
-- Scanned in this order instead, the first runnable row ends the search (`jobs.rs`, `claim`).
CREATE INDEX jobs_by_age ON jobs (created_at) WHERE state IN ('queued', 'running');
