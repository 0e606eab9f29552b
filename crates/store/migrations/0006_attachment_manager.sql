-- Who makes an attachment real on its node: 'agent' (the node's host agent)
-- or 'csi' (the CSI node plugin; the host agent leaves such attachments
-- alone).
ALTER TABLE attachments ADD COLUMN manager TEXT NOT NULL DEFAULT 'agent';
