"""One segment (``%020d.log`` + its indexes), the recovery scan that loads a directory
of segments, the swap of a rewritten segment, and the on-disk format version."""
