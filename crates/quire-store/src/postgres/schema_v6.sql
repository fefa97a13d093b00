-- Cluster mode: every node keeps its own keyword index and vector replica in step with the
-- shared store by following `index_feed`, the changes to what the indexes hold in the order
-- they were committed. Positions come from the one row of `index_feed_head`: a transaction
-- takes that row's lock as its last step, so positions are handed out in commit order and a
-- follower that has read up to N never finds a change below N appear later.
CREATE TABLE index_feed (
    position    BIGINT PRIMARY KEY,
    document_id UUID NOT NULL,
    source_id   UUID NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('ready', 'removed')),
    -- The database's clock: when the change was committed, for an operator looking at lag.
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE index_feed_head (
    only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
    position BIGINT NOT NULL
);
INSERT INTO index_feed_head (only_row, position) VALUES (TRUE, 0);

-- A ready document's chunk vectors, as the node that embedded it computed them: little-endian
-- f32, `dimensions` per chunk in ordinal order, for the model named. Other nodes copy them
-- into their vector replicas instead of embedding the document again.
CREATE TABLE document_vectors (
    document_id UUID PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    model       TEXT NOT NULL,
    dimensions  INTEGER NOT NULL CHECK (dimensions > 0),
    data        BYTEA NOT NULL
);
