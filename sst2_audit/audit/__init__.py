"""Room 9, audit: re-checking a finished run offline, level by level (loading, claims, arithmetic,
identity, rescore), the runner that orders them and decides the verdict, groups and the compare."""
