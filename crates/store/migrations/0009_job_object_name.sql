-- The name of the volume a job works on, kept with the job so that it is
-- still shown (and can be filtered on) after the volume is deleted.
ALTER TABLE jobs ADD COLUMN object_name TEXT NOT NULL DEFAULT '';

-- Jobs recorded before: the name of their volume when it still exists, else
-- the name in the arguments of a job on the same volume whose kind carries
-- the volume's name (its create, delete or recovery; a snapshot job's `name`
-- is the snapshot's, not the volume's).
UPDATE jobs SET object_name = COALESCE(
    (SELECT name FROM volumes WHERE volumes.id = jobs.object),
    (SELECT json_extract(named.args, '$.name') FROM jobs AS named
     WHERE named.object = jobs.object
       AND named.type IN ('volume_create', 'volume_delete', 'volume_recovery')
     ORDER BY named.id LIMIT 1),
    '');

CREATE INDEX jobs_object_name ON jobs(tenant_id, object_name);
