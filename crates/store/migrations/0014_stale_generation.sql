-- Stale copies (issue 21): the generation a lost copy missed. When a copy
-- is marked lost (lost_ms), this is its volume's front epoch at that
-- moment: the copy missed that front's writes from then on, and every
-- later front's. NULL while the copy is not lost; cleared with lost_ms
-- when the slice is rebuilt or moved (a fresh copy).
ALTER TABLE slices ADD COLUMN stale_generation INTEGER;
