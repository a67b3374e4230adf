"""Every string (or every leaf) of a JSON value by its path, a value set at a path, and a leaf changed: what the
forging fuzz tests share."""


def string_paths(value, path=()):
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from string_paths(item, path + (key,))
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from string_paths(item, path + (number,))


def set_at(value, path, new):
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


def leaf_paths(value, path=()):
    """(path, value) of every leaf: a scalar, or an empty list or object."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
    if not items:
        yield path, value
        return
    for key, item in items:
        yield from leaf_paths(item, path + (key,))


def changed(value):
    """Another value of the same JSON type (a type checker's refusal would hide a field nobody holds)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + (1 if isinstance(value, int) else 0.125)
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return ("1" if value[0] == "0" else "0") + value[1:]  # a sha256 kept well-formed: a reader's format check
    if isinstance(value, str):                                # would hide a hash nobody compares
        return value + "x"
    return ["x"] if isinstance(value, list) else {"x": 1} if isinstance(value, dict) else "x"


def every_leaf_held(record, audit, descriptive: tuple = (), skip=lambda path: False) -> dict:
    """Each leaf of the JSON file `record` (a Path) changed alone (changed()) and `audit()` -> (exit code, output)
    run on it: exit 1 or 2 for every leaf, but exit 4 for the descriptive ones (dotted paths, `*` for a list index,
    a prefix ending in '.'): a field held by nothing. The file is restored; returns the counts of each."""
    import json

    original = record.read_text()
    counted = {"held": 0, "descriptive": 0}
    try:
        for path, value in leaf_paths(json.loads(original)):
            if skip(path):
                continue
            edited = json.loads(original)
            set_at(edited, path, changed(value))
            record.write_text(json.dumps(edited, indent=2))
            code, out = audit()
            dotted = ".".join("*" if isinstance(key, int) else key for key in path)
            kept = any(dotted == field or field.endswith(".") and dotted.startswith(field) for field in descriptive)
            assert code == 4 if kept else code in (1, 2), (record.name, path, code, out[-1500:])
            counted["descriptive" if kept else "held"] += 1
    finally:
        record.write_text(original)
    return counted
