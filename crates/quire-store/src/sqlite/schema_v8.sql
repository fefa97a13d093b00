-- A webhook receives only the events of the sources its registering key could see. NULL: every
-- source (webhooks registered before this version were registered by keys with no scope check,
-- so they keep receiving everything); otherwise a JSON array of source ids.
ALTER TABLE webhooks ADD COLUMN source_ids TEXT;
