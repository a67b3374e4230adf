"""Room 10, bundle: packing a reviewer bundle from an audited run or group and reading one back (ustar)."""
