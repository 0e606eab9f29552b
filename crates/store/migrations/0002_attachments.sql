-- Nodes that may attach volumes (media nodes and client hosts) and their
-- addresses; attachments of volumes to nodes, each with its NBD export.

CREATE TABLE nodes (
    name     TEXT PRIMARY KEY,
    zone     TEXT NOT NULL DEFAULT '',
    -- IP address the node connects from; NULL: not allowed to attach.
    address  TEXT
);

CREATE TABLE attachments (
    volume_id    TEXT NOT NULL REFERENCES volumes(id),
    node         TEXT NOT NULL,
    tenant_id    INTEGER NOT NULL REFERENCES tenants(id),
    snapshot     TEXT NOT NULL DEFAULT 'top',
    readonly     INTEGER NOT NULL,
    mountpoint   TEXT NOT NULL DEFAULT '',
    -- Unguessable name of the NBD export serving this attachment.
    export_name  TEXT NOT NULL UNIQUE,
    -- Attaching -> Attached -> Detaching (then the row is removed)
    state        TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    PRIMARY KEY (volume_id, node)
);
CREATE INDEX attachments_tenant ON attachments(tenant_id);
