"""'did you mean ...?' for a mistyped name (a command, an option, a profile, a task), from the names that exist."""

import difflib


def did_you_mean(name, choices) -> str:
    """" (did you mean 'X'?)" when one of `choices` is close to `name`, else ''."""
    near = difflib.get_close_matches(str(name), [str(choice) for choice in choices], n=1, cutoff=0.75)
    return f" (did you mean {near[0]!r}?)" if near else ""
