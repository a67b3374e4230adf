"""Room 1, util: plain helpers with no protocol in them (errors and exit codes, hashing, escaping, atomic
writes, progress and console lines, deferred warm-up of heavy imports, the environment's versions)."""
