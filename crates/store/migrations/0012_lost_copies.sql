-- One copy of a slice lost while its medium stays healthy (a slice or
-- snapshot file gone from a medium that still reads): when it was found
-- lost, in ms. NULL: the copy is as healthy as its medium. A slice moved or
-- rebuilt onto another medium is a fresh copy and clears it.
ALTER TABLE slices ADD COLUMN lost_ms INTEGER;
