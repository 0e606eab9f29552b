-- Snapshots of volumes; attachments of snapshots; media health and the
-- space snapshots hold on them.

CREATE TABLE snapshots (
    -- The data plane's id of the snapshot: AUTOINCREMENT never reuses one,
    -- so a volume's snapshot ids grow, as its copy-on-write layers require.
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    -- snapshotid in the API.
    id               TEXT NOT NULL UNIQUE,
    volume_id        TEXT NOT NULL REFERENCES volumes(id),
    tenant_id        INTEGER NOT NULL REFERENCES tenants(id),
    name             TEXT NOT NULL,
    consistency      TEXT NOT NULL,
    -- The volume's size when the snapshot was taken.
    volume_size_gib  INTEGER NOT NULL,
    -- Creating -> Ready -> Deleting (then the row is removed)
    state            TEXT NOT NULL,
    -- Bytes the snapshot holds on media (every copy), as last measured.
    used_bytes       INTEGER NOT NULL DEFAULT 0,
    -- Writable reference fields svs stores and returns.
    attributes       TEXT NOT NULL DEFAULT '{}',
    created_ms       INTEGER NOT NULL,
    UNIQUE (volume_id, name)
);
CREATE INDEX snapshots_tenant ON snapshots(tenant_id);

-- An attachment is of the live volume ('top') or of a snapshot (its id):
-- the key gains the snapshot.
CREATE TABLE attachments_v2 (
    volume_id    TEXT NOT NULL REFERENCES volumes(id),
    node         TEXT NOT NULL,
    tenant_id    INTEGER NOT NULL REFERENCES tenants(id),
    snapshot     TEXT NOT NULL DEFAULT 'top',
    readonly     INTEGER NOT NULL,
    mountpoint   TEXT NOT NULL DEFAULT '',
    export_name  TEXT NOT NULL UNIQUE,
    state        TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    PRIMARY KEY (volume_id, snapshot, node)
);
INSERT INTO attachments_v2 SELECT volume_id, node, tenant_id, snapshot, readonly, mountpoint,
    export_name, state, created_ms FROM attachments;
DROP TABLE attachments;
ALTER TABLE attachments_v2 RENAME TO attachments;
CREATE INDEX attachments_tenant ON attachments(tenant_id);

-- Ready, or Failed (its slices are lost).
ALTER TABLE media ADD COLUMN state TEXT NOT NULL DEFAULT 'Ready';
-- Bytes snapshots hold on the medium, as last measured.
ALTER TABLE media ADD COLUMN snapshot_bytes INTEGER NOT NULL DEFAULT 0;
