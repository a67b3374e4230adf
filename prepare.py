"""Fetch, verify and cache the pinned resources (see README)."""

import sys

from sst2_audit.cli import prepare_main

if __name__ == "__main__":
    sys.exit(prepare_main())
