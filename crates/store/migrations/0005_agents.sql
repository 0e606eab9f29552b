-- Host agents: one credential per node (only a SHA-256 of its secret is
-- kept), and what each node's agent last reported about its attachments.

CREATE TABLE node_agents (
    node           TEXT PRIMARY KEY REFERENCES nodes(name),
    -- The public part of the credential (`svsnode.<id>.<secret>`); NULL
    -- once revoked (the row stays for last_seen_ms).
    credential_id  TEXT UNIQUE,
    -- Hex SHA-256 of the secret: the secret is random and long, so a plain
    -- hash is enough.
    secret_hash    TEXT,
    created_ms     INTEGER,
    -- Last request the node's agent authenticated.
    last_seen_ms   INTEGER
);

-- The host's view of an attachment, as its node's agent last reported it
-- (NULL until it reports).
ALTER TABLE attachments ADD COLUMN host_state TEXT;
ALTER TABLE attachments ADD COLUMN host_detail TEXT;
ALTER TABLE attachments ADD COLUMN host_device TEXT;
ALTER TABLE attachments ADD COLUMN host_mountpath TEXT;
-- Total bytes of the mounted filesystem.
ALTER TABLE attachments ADD COLUMN fs_bytes INTEGER;
-- The volume size (GiB) the host's filesystem was last grown to fill.
ALTER TABLE attachments ADD COLUMN fs_size_gib INTEGER;
-- The last attempt to grow the filesystem failed with this.
ALTER TABLE attachments ADD COLUMN grow_error TEXT;
ALTER TABLE attachments ADD COLUMN host_updated_ms INTEGER;
