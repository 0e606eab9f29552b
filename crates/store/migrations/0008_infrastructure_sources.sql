-- Who manages each medium and node: 'config' (the configuration file: made
-- to match it at every start, and the API refuses to change or remove it)
-- or 'api' (added through the API, kept in the database across restarts).
--
-- Every medium stored so far came from the configuration file. Nodes so far
-- came from the file or from POST /nodes, which the database cannot tell
-- apart: they start as 'api' (kept at start, never dropped), and the next
-- start marks those the file still lists 'config'.
ALTER TABLE media ADD COLUMN managed_by TEXT NOT NULL DEFAULT 'config';
ALTER TABLE nodes ADD COLUMN managed_by TEXT NOT NULL DEFAULT 'api';
