-- Sources that sync themselves from an origin (a folder on the server, an S3 bucket): the
-- origin's settings (no credentials: those are sealed with the operator's key), the runs, and
-- what each item of the origin looked like when it was last taken (its fingerprint), so an
-- unchanged item is not fetched again.
CREATE TABLE source_syncs (
    source_id        TEXT PRIMARY KEY REFERENCES sources (id) ON DELETE CASCADE,
    kind             TEXT NOT NULL,
    config           TEXT NOT NULL,
    sealed_secret    TEXT,
    interval_seconds INTEGER NOT NULL,
    next_run_at      INTEGER
);
CREATE INDEX source_syncs_due ON source_syncs (next_run_at) WHERE next_run_at IS NOT NULL;

-- status: running | succeeded | failed. At most one run of a source runs.
CREATE TABLE sync_runs (
    id          TEXT PRIMARY KEY,
    source_id   TEXT NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    node        TEXT NOT NULL,
    status      TEXT NOT NULL,
    added       INTEGER NOT NULL DEFAULT 0,
    updated     INTEGER NOT NULL DEFAULT 0,
    deleted     INTEGER NOT NULL DEFAULT 0,
    unchanged   INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    failures    TEXT NOT NULL DEFAULT '[]',
    error       TEXT,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER
);
CREATE UNIQUE INDEX sync_runs_one_running ON sync_runs (source_id) WHERE status = 'running';
CREATE INDEX sync_runs_by_source ON sync_runs (source_id, started_at);

CREATE TABLE sync_items (
    source_id   TEXT NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    external_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    PRIMARY KEY (source_id, external_id)
);
