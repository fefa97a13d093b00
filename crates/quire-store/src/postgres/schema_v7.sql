-- The nodes of a cluster that are running, each with the embedding model it searches with:
-- a node starting with another model than a live node's is refused, so vectors of two models
-- are never mixed (a replica also only copies vectors of its own model). `seen_at` is renewed
-- while the node runs; a node not seen for a while is taken for gone.
CREATE TABLE cluster_nodes (
    node            TEXT PRIMARY KEY,
    embedding_model TEXT,
    seen_at         TIMESTAMPTZ NOT NULL
);
