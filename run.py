"""Score the dev rows through lm-eval and the independent path (see README)."""

import sys

from sst2_audit.cli import run_main

if __name__ == "__main__":
    sys.exit(run_main())
