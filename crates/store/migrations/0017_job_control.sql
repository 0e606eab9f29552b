-- Steering a job (issue 23).

-- When a cancel of the job was asked for (ms since the epoch); NULL: never.
-- The instance holding the job sees it, stops the job at its next safe point
-- and undoes it; a job that finds it set when it starts only undoes.
ALTER TABLE jobs ADD COLUMN cancel_ms INTEGER;
-- 1 once the job passed the point after which it finishes rather than being
-- undone (a resize growing its slices): a cancel is refused from then on.
ALTER TABLE jobs ADD COLUMN committed INTEGER NOT NULL DEFAULT 0;

-- When the job was paused on request (ms since the epoch); NULL: not paused.
-- Its holder stops its copies at their last checkpoint and runs it again once
-- it is resumed.
ALTER TABLE jobs ADD COLUMN paused_ms INTEGER;
-- The job's own copy rate in bytes per second (0: unthrottled); NULL: the
-- service's movement_rate.
ALTER TABLE jobs ADD COLUMN movement_rate INTEGER;

-- 1 for a step a cancel added: a switched slice moved back to where it was.
ALTER TABLE resize_steps ADD COLUMN undo INTEGER NOT NULL DEFAULT 0;
