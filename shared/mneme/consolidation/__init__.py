"""consolidate: the stage pipeline that turns episodes into facts."""
