-- Where an interrupted slice copy may resume: the target's bytes below
-- `copy_checkpoint` were copied, verified and made durable before it was
-- recorded. `copy_checkpoint_live` says which copy path wrote them (through
-- the volume's shared I/O, or file to file): a checkpoint is only resumed by
-- the same path, as only that path kept the target up to date with writes.
ALTER TABLE resize_steps ADD COLUMN copy_checkpoint INTEGER NOT NULL DEFAULT 0;
ALTER TABLE resize_steps ADD COLUMN copy_checkpoint_live INTEGER NOT NULL DEFAULT 0;
