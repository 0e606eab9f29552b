-- Several svs serve instances on one database (issue 22).

-- A job is claimed under a lease: the instance working on it (owner), the
-- claim's number (epoch, bumped at every claim; a write of an older claim is
-- refused) and when the lease runs out unless renewed (ms since the epoch).
-- NULL owner: nobody works on it now (new, released, or its owner stopped).
ALTER TABLE jobs ADD COLUMN lease_owner TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN lease_expires_ms BIGINT;

-- Named leases held by one instance at a time (the reconcilers' leader).
CREATE TABLE leases (
    name        TEXT COLLATE "C" PRIMARY KEY,
    owner       TEXT COLLATE "C" NOT NULL,
    epoch       BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL
);

-- The keys that sign tokens, shared by every instance: the current one
-- (retired_ms NULL) and retired ones kept while tokens they signed live.
CREATE TABLE signing_keys (
    kid         TEXT COLLATE "C" PRIMARY KEY,
    seed        BYTEA NOT NULL,
    created_ms  BIGINT NOT NULL,
    retired_ms  BIGINT
);
CREATE UNIQUE INDEX signing_keys_one_current ON signing_keys((retired_ms IS NULL)) WHERE retired_ms IS NULL;

-- What each storage node last reported of the fronts it runs (a JSON list),
-- written by the instance its poll reached, so that a job on any instance
-- sees it.
CREATE TABLE front_reports (
    node         TEXT COLLATE "C" PRIMARY KEY,
    open         TEXT COLLATE "C" NOT NULL,
    reported_ms  BIGINT NOT NULL
);
