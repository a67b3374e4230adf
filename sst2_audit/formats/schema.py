"""The one strict reader of typed JSON: the lock, records, manifests and lm-eval's output go through it.

A value is checked against a type hint exactly as JSON gives it: exact types (1 is not 1.0, true is
not 1), finite floats, objects with exactly their fields (missing and unexpected ones named together),
lists and maps item by item, tuples built from lists. A dataclass is built, a TypedDict stays a dict.
strict_json sits in front of it (duplicate keys, size and depth limits); each schema's upgrade chain
runs before it.

Why not pydantic or msgspec (tried: pydantic 2 with strict=True and extra="forbid", msgspec's
convert(strict=True) with forbid_unknown_fields): both accept `1` for a float field and NaN for a
float, msgspec names only the first missing or unexpected field, and either would be one more
dependency (and its import) for this one job. Hostile input gets the stricter rule here.
"""

import dataclasses
import functools
import math
import types
import typing

from sst2_audit.util.errors import InputError

# a class's hints are fixed once it is defined; resolving them is most of a record read's cost without the cache
_hints = functools.cache(typing.get_type_hints)


def _type_name(hint) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


_EXACT = (bool, int, str, dict, list)  # checked by exact type: True is no int, 1 no float


@functools.cache
def _shape(hint) -> tuple:
    """What typed() asks of a hint, once per hint."""
    return typing.get_origin(hint), typing.get_args(hint), dataclasses.is_dataclass(hint), typing.is_typeddict(hint)


def typed(hint, value, where):
    """Check a plain JSON value against a type hint: exact types, finite floats, no bool for int.

    A TypedDict stays a dict, with exactly its keys; a dataclass is built.
    """
    if hint in _EXACT and type(value) is hint or hint is float and type(value) is float and math.isfinite(value):
        return value  # the common case first: a samples file checks millions of scalars
    origin, args, is_dataclass, is_typeddict = _shape(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return typed(inner[0], value, where)  # X | None: X's own message
        for choice in inner:  # int | str: the first type the value is exactly
            try:
                return typed(choice, value, where)
            except InputError:
                continue
        if type(value) is float and float in inner:  # a float, but not finite: say that, not "float or ..., got float"
            others = " or ".join(_type_name(h) for h in inner if h is not float)
            raise InputError(f"{where}: expected a finite number or {others}, got {value!r}.")
        raise InputError(f"{where}: expected {' or '.join(_type_name(h) for h in inner)}, got "
                         f"{type(value).__name__} {str(value)[:60]!r}.")
    if hint is typing.Any or hint is object:
        return value
    if is_dataclass:
        return convert(hint, value, where)
    if is_typeddict:
        return _object(_hints(hint), value, where, hint.__required_keys__)
    if hint is bool:
        ok = type(value) is bool
    elif hint is int:
        ok = type(value) is int
    elif hint is float:
        ok = type(value) is float and math.isfinite(value)
        if type(value) is float and not ok:
            raise InputError(f"{where}: expected a finite number, got {value!r}.")
    elif hint is str:
        ok = type(value) is str
    elif hint is list or origin is list:
        ok = type(value) is list
        if ok and args:
            return [typed(args[0], item, f"{where}[{i}]") for i, item in enumerate(value)]
    elif origin is tuple:  # tuple[X, ...]: a JSON list, built as a tuple
        ok = type(value) is list
        if ok:
            return tuple(typed(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
    elif hint is dict or origin is dict:
        ok = type(value) is dict
        if ok and args:
            return {key: typed(args[1], item, f"{where}.{key}") for key, item in value.items()}
    else:
        ok = True
    if not ok:
        raise InputError(f"{where}: expected {_type_name(hint)}, got {type(value).__name__} {str(value)[:60]!r}.")
    return value


def _fields_error(where: str, missing, extra, known) -> InputError:
    """One message naming every missing and every unexpected field at once, and what the object holds."""
    said = ([f"field(s) missing: {', '.join(missing)}"] if missing else []) + \
        ([f"unexpected field(s): {', '.join(repr(name[:40]) for name in extra[:5])}"] if extra else [])
    return InputError(f"{where}: {'; '.join(said)} (it holds {', '.join(known)}).")


def _object(schema: dict, value, where: str, required) -> dict:
    """A TypedDict's object: its required keys present (a NotRequired key may be absent), nothing else."""
    if type(value) is not dict:
        raise InputError(f"{where}: expected an object, got {type(value).__name__}.")
    missing, extra = sorted(set(required) - set(value)), sorted(set(value) - set(schema))
    if missing or extra:
        raise _fields_error(where, missing, extra, schema)
    return {key: typed(hint, value[key], f"{where}.{key}") for key, hint in schema.items() if key in value}


def convert(kind, value, where):
    """Build nested dataclasses from plain JSON, checking field names and types exactly."""
    if not dataclasses.is_dataclass(kind):
        return typed(kind, value, where)
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected an object, got {type(value).__name__}.")
    hints = _hints(kind)
    fields = dataclasses.fields(kind)
    missing = [f.name for f in fields if f.name not in value
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    extra = sorted(set(value) - {f.name for f in fields})
    if missing or extra:
        raise _fields_error(where, missing, extra, [f.name for f in fields])
    built = {name: typed(hints[name], item, f"{where}.{name}") for name, item in value.items()}
    return kind(**built)


def require_kind(raw, kind: str, version: int, where: str) -> dict:
    """A record's envelope: a JSON object of exactly this kind and schema_version (one message for every kind)."""
    if not isinstance(raw, dict) or raw.get("kind") != kind or raw.get("schema_version") != version:
        got = (raw.get("kind"), raw.get("schema_version")) if isinstance(raw, dict) else type(raw).__name__
        raise InputError(f"{where}: expected kind {kind!r} schema_version {version}, got {got!r}.")
    return raw


def field_at(raw, keys: tuple, where: str):
    """The value at a path of nested objects, or exit 2 naming the path that is missing."""
    value = raw
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise InputError(f"{where}: field {'.'.join(map(str, keys))} is missing.")
        value = value[key]
    return value
