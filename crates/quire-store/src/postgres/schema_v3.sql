-- A webhook receives only the events of the sources its registering key could see. NULL: every
-- source (webhooks registered before this version keep receiving everything).
ALTER TABLE webhooks ADD COLUMN source_ids UUID[];
