-- The queue in claim order. A claim takes the oldest runnable job; with the runnable rows
-- found through `jobs_runnable` (two ranges, queued and running), SQLite sorted every queued
-- job to find it, with the write lock held meanwhile (0.5 ms with 5,000 queued, 11 ms with
-- 100,000: bench/job-claim). Scanned in this order instead, the first runnable row ends the
-- search (`jobs.rs`, `NEXT_JOB`).
CREATE INDEX jobs_by_age ON jobs (created_at) WHERE state IN ('queued', 'running');
