"""Re-check a finished run offline; pack or check a reviewer bundle (see README)."""

import sys

from sst2_audit.cli import audit_main

if __name__ == "__main__":
    sys.exit(audit_main())
