-- svs schema, version 1. Released migrations are never edited; add a new file.

CREATE TABLE tenants (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL UNIQUE,
    created_ms  INTEGER NOT NULL
);

CREATE TABLE users (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id      INTEGER NOT NULL REFERENCES tenants(id),
    email          TEXT NOT NULL UNIQUE COLLATE NOCASE,
    name           TEXT NOT NULL,
    password_hash  TEXT NOT NULL,
    is_admin       INTEGER NOT NULL DEFAULT 0,
    created_ms     INTEGER NOT NULL
);

-- Refresh tokens are opaque; only their SHA-256 is kept.
CREATE TABLE refresh_tokens (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id     INTEGER NOT NULL REFERENCES users(id),
    token_hash  TEXT NOT NULL UNIQUE,
    issued_ms   INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    revoked     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX refresh_tokens_user ON refresh_tokens(user_id);

CREATE TABLE media (
    id         TEXT PRIMARY KEY,
    node       TEXT NOT NULL,
    zone       TEXT NOT NULL,
    directory  TEXT NOT NULL,
    size_gib   INTEGER NOT NULL
);

CREATE TABLE policies (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id         INTEGER NOT NULL REFERENCES tenants(id),
    name              TEXT NOT NULL,
    resiliency_media  INTEGER NOT NULL,
    resiliency_node   INTEGER NOT NULL,
    resiliency_zone   INTEGER NOT NULL,
    -- Every other policy field, as the API accepted it.
    attributes        TEXT NOT NULL,
    created_ms        INTEGER NOT NULL,
    created_by_name   TEXT NOT NULL,
    created_by_email  TEXT NOT NULL,
    updated_ms        INTEGER,
    updated_by_name   TEXT,
    updated_by_email  TEXT,
    UNIQUE (tenant_id, name)
);

CREATE TABLE volumes (
    id          TEXT PRIMARY KEY,
    tenant_id   INTEGER NOT NULL REFERENCES tenants(id),
    name        TEXT NOT NULL,
    type        TEXT NOT NULL,
    size_gib    INTEGER NOT NULL,
    policy_id   INTEGER NOT NULL REFERENCES policies(id),
    zone        TEXT,
    -- Writable reference fields svs stores and returns but does not interpret.
    attributes  TEXT NOT NULL,
    state       TEXT NOT NULL,
    -- The unfinished job working on this volume, if any (for progress/status).
    job_id      INTEGER,
    created_ms  INTEGER NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE slices (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    volume_id  TEXT NOT NULL REFERENCES volumes(id) ON DELETE CASCADE,
    copy       INTEGER NOT NULL,
    col        INTEGER NOT NULL,
    medium_id  TEXT NOT NULL REFERENCES media(id),
    size_gib   INTEGER NOT NULL,
    UNIQUE (volume_id, copy, col),
    -- No two slices of one volume on the same medium.
    UNIQUE (volume_id, medium_id)
);
CREATE INDEX slices_medium ON slices(medium_id);

CREATE TABLE jobs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id     INTEGER NOT NULL REFERENCES tenants(id),
    type          TEXT NOT NULL,
    object        TEXT NOT NULL,
    args          TEXT NOT NULL,
    state         TEXT NOT NULL,
    status        TEXT NOT NULL,
    progress      INTEGER NOT NULL DEFAULT 0,
    starttime_ms  INTEGER,
    endtime_ms    INTEGER,
    user_id       INTEGER NOT NULL,
    username      TEXT NOT NULL,
    useremail     TEXT NOT NULL,
    details       TEXT NOT NULL DEFAULT '[]',
    -- Set on resize jobs that may move data (they block the seed's nine operations).
    data_movement INTEGER NOT NULL DEFAULT 0,
    created_ms    INTEGER NOT NULL
);
CREATE INDEX jobs_tenant ON jobs(tenant_id, id);
CREATE INDEX jobs_object ON jobs(object, state);
CREATE INDEX jobs_state ON jobs(state);

-- Space booked by a running job on a medium; released when the job ends.
CREATE TABLE reservations (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     INTEGER NOT NULL REFERENCES jobs(id),
    medium_id  TEXT NOT NULL REFERENCES media(id),
    gib        INTEGER NOT NULL,
    UNIQUE (job_id, medium_id)
);
CREATE INDEX reservations_medium ON reservations(medium_id);

-- The steps of a resize: growths and moves, persisted before any disk is touched.
CREATE TABLE resize_steps (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id       INTEGER NOT NULL REFERENCES jobs(id),
    slice_id     INTEGER NOT NULL,
    from_medium  TEXT NOT NULL,
    -- NULL for a slice growing in place.
    to_medium    TEXT,
    old_size     INTEGER NOT NULL,
    new_size     INTEGER NOT NULL,
    -- planned -> switched (placement now on to_medium) -> done (source removed)
    state        TEXT NOT NULL
);
CREATE INDEX resize_steps_job ON resize_steps(job_id);
