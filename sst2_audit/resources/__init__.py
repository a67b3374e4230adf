"""Room 6, resources: where resources come from (sources/: hub, wheel, demo, local folder), the verified
store and cache, conversion of the embedded model, prepare, and --pin of a user's own model and data."""
