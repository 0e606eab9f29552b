-- A volume's front on a storage node (issue 21, setting `fronts = "nodes"`).

-- The storage node running the volume's front (its NBD exports); NULL: the
-- front is in svs serve. Cleared when the volume's last attachment goes.
ALTER TABLE volumes ADD COLUMN front_node TEXT;
-- Where attaching hosts reach the node's NBD server for fronts (IP:PORT),
-- as it registered; NULL: the node runs no fronts.
ALTER TABLE nodes ADD COLUMN front_address TEXT;
