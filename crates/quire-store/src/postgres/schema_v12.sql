-- Sources that sync themselves; see the SQLite store's schema_v15.sql.
CREATE TABLE source_syncs (
    source_id        UUID PRIMARY KEY REFERENCES sources (id) ON DELETE CASCADE,
    kind             TEXT NOT NULL,
    config           TEXT NOT NULL,
    sealed_secret    TEXT,
    interval_seconds INTEGER NOT NULL,
    next_run_at      TIMESTAMPTZ
);
CREATE INDEX source_syncs_due ON source_syncs (next_run_at) WHERE next_run_at IS NOT NULL;

-- status: running | succeeded | failed. At most one run of a source runs.
CREATE TABLE sync_runs (
    id          UUID PRIMARY KEY,
    source_id   UUID NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    node        TEXT NOT NULL,
    status      TEXT NOT NULL,
    added       INTEGER NOT NULL DEFAULT 0,
    updated     INTEGER NOT NULL DEFAULT 0,
    deleted     INTEGER NOT NULL DEFAULT 0,
    unchanged   INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    failures    TEXT NOT NULL DEFAULT '[]',
    error       TEXT,
    started_at  TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    -- Insertion order: runs started in the same instant are listed newest first.
    seq         BIGSERIAL NOT NULL
);
CREATE UNIQUE INDEX sync_runs_one_running ON sync_runs (source_id) WHERE status = 'running';
CREATE INDEX sync_runs_by_source ON sync_runs (source_id, started_at);

CREATE TABLE sync_items (
    source_id   UUID NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    external_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    PRIMARY KEY (source_id, external_id)
);
