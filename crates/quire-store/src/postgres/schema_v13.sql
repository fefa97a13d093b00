-- A sync run is leased to the node that runs it, like a job: the node renews the lease while
-- the run goes on, and a run whose lease ran out (its node died or hung) is ended as
-- interrupted by whichever node's scheduler sees it first. NULL: not running.
ALTER TABLE sync_runs ADD COLUMN lease_until TIMESTAMPTZ;
