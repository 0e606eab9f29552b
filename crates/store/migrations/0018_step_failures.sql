-- Each slice of a movement or a recovery with its own outcome (issue 23):
-- the cause of the step's last failed copy (NULL: none) and how many of its
-- copies failed.
ALTER TABLE resize_steps ADD COLUMN failure TEXT;
ALTER TABLE resize_steps ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
