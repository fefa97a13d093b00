-- Cluster mode: one generation queue for every node. Each question waiting for, or holding, a
-- generation slot is a row; joins are serialised (an advisory lock), so `seq` is the order of
-- arrival. Nodes renew `seen_at` of their own tickets while they hold any; a ticket not seen
-- for a while belonged to a node that died, and is removed.
CREATE TABLE generation_tickets (
    id      UUID PRIMARY KEY,
    seq     BIGSERIAL NOT NULL UNIQUE,
    key_id  UUID NOT NULL,
    node    TEXT NOT NULL,
    running BOOLEAN NOT NULL,
    seen_at TIMESTAMPTZ NOT NULL
);
