"""JSON text exactly as json.dumps(value, indent=2, ensure_ascii=False, sort_keys=...) writes it, built by one
recursive writer in json's own order of checks, without its generators: json writes an indented value in Python,
piece by piece, and both the adopted records (util/atomic.py::write_json) and lm-eval's doc_hash text
(protocol/rules.py) are written this way many thousands of times a run."""

import dataclasses
import json
import math

string = json.encoder.encode_basestring  # what json writes for a string with ensure_ascii=False


def float_text(value: float) -> str:
    return "NaN" if value != value else "Infinity" if value == math.inf else "-Infinity" if value == -math.inf \
        else float.__repr__(value)


def key_text(key) -> str:
    """A dict key as json turns it into text (before it is quoted)."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return float_text(key)
    if key is True or key is False or key is None:
        return "true" if key else "false" if key is False else "null"
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


def fields_of(value) -> dict:
    """A record (a dataclass) as dataclasses.asdict gives it, one level; anything else is json's TypeError."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def write(value, level: int, out: list, sort_keys: bool = True) -> None:
    """The text of value at this indent level, appended to out (a dataclass written as its fields)."""
    if isinstance(value, str):
        out.append(string(value))
    elif value is None or value is True or value is False:
        out.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(float_text(value))
    elif isinstance(value, (list, tuple, dict)):
        if not value:
            out.append("[]" if isinstance(value, (list, tuple)) else "{}")
            return
        inner, dict_like = "\n" + "  " * (level + 1), isinstance(value, dict)
        out.append(("{" if dict_like else "[") + inner)
        items = (sorted(value.items()) if sort_keys else value.items()) if isinstance(value, dict) else value
        for position, item in enumerate(items):
            if position:
                out.append("," + inner)
            if dict_like:
                out.append(string(key_text(item[0])) + ": ")
            write(item[1] if dict_like else item, level + 1, out, sort_keys)
        out.append("\n" + "  " * level + ("}" if dict_like else "]"))
    else:
        write(fields_of(value), level, out, sort_keys)


def indented(value, sort_keys: bool = True) -> str:
    out: list = []
    write(value, 0, out, sort_keys)
    return "".join(out)
