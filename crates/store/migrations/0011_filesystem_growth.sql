-- What svs knows of a volume's filesystem when it does not fill the volume
-- (a growth failed): the volume size in GiB it was last grown to fill, and
-- why the last growth failed. NULL: it fills the volume.
ALTER TABLE volumes ADD COLUMN fs_size_gib INTEGER;
ALTER TABLE volumes ADD COLUMN fs_error TEXT;
-- The job whose growth request the agent's report answers, so a job knows
-- a report is about its request even when it reads like the last one.
ALTER TABLE attachments ADD COLUMN grow_job INTEGER;
