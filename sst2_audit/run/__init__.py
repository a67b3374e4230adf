"""Room 8, run: one run of a profile or a group, its stages and the independent path's thread."""
