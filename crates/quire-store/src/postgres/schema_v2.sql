-- Outbox claims become leases. A dispatcher claims a row until claimed_until; logging the
-- attempt deletes the row. A row whose claim ran out (its node died between claiming and
-- logging) is claimed again and sent with the same event id, so receivers can de-duplicate.
DROP INDEX webhook_outbox_pending;
DROP INDEX webhook_outbox_by_event;
ALTER TABLE webhook_outbox ADD COLUMN claimed_by TEXT, ADD COLUMN claimed_until TIMESTAMPTZ;
-- Rows claimed under the old rule and never logged: their dispatcher stopped mid-delivery.
-- They are expired claims now, attempted again.
UPDATE webhook_outbox SET claimed_by = 'before-schema-v2', claimed_until = claimed_at
WHERE claimed_at IS NOT NULL;
ALTER TABLE webhook_outbox DROP COLUMN claimed_at;
