-- Storage nodes (issue 21): nodes that run `svs storage-node`, register
-- their media and heartbeat; and each volume's front epoch.

-- A node becomes a storage node at its first registration ('storage');
-- NULL: a node that only attaches volumes (or runs a host agent).
ALTER TABLE nodes ADD COLUMN role TEXT;
-- Where fronts reach the node's slice server (IP:PORT), as it registered.
ALTER TABLE nodes ADD COLUMN slice_address TEXT;
-- Its last registration or heartbeat, in ms.
ALTER TABLE nodes ADD COLUMN last_heartbeat_ms INTEGER;
-- 'Online', or 'Offline' once no heartbeat came for storage_node_timeout.
ALTER TABLE nodes ADD COLUMN storage_state TEXT;
-- The secret fronts present to the node's slice server. Kept in the clear,
-- unlike node credentials: the control plane hands it to every front, so it
-- must be able to read it back. It is cleared whenever the node's
-- credential is reissued or revoked, and the next registration makes a new
-- one.
ALTER TABLE nodes ADD COLUMN slice_credential TEXT;

-- What a node credential allows: 'agent' (the host agent's routes) or
-- 'storage' (the storage node's routes).
ALTER TABLE node_agents ADD COLUMN role TEXT NOT NULL DEFAULT 'agent';

-- A medium registered by a storage node has managed_by = 'node', and its
-- `node` column is the node that owns it. When the node stops listing a
-- medium that holds slices, the medium is failed and this is set: the
-- node's next listing of it brings it back (with its slices lost).
ALTER TABLE media ADD COLUMN node_dropped_ms INTEGER;

-- The epoch of the volume's front: raised each time a front opens the
-- volume, so that storage nodes refuse the writes of any older front.
ALTER TABLE volumes ADD COLUMN front_epoch INTEGER NOT NULL DEFAULT 0;
