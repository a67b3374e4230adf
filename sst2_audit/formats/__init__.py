"""Room 3, formats: every persisted format and its one reader (strict JSON, the typed schema reader, the
lock and its run settings, the cache manifest, run/group/failure/private records with their upgrades, and
lm-eval's own output as the audit reads it)."""
