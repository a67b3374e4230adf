"""adopted.json read by its kind: the one reader of an adopted folder's record, whatever the task's shape."""

from sst2_audit.formats import adopted, adopted_generation, adopted_rolling, strict_json
from sst2_audit.formats.adopted import AdoptedCommon

READERS = {adopted.ADOPTED_KIND: adopted.from_dict, adopted_generation.GENERATION_KIND: adopted_generation.from_dict,
           adopted_rolling.ROLLING_KIND: adopted_rolling.from_dict}


def read_adopted(path) -> AdoptedCommon:
    """A multiple_choice task's, a generate_until task's or a loglikelihood_rolling task's record; any other kind is
    exit 2, named as the multiple_choice record's reader names it."""
    raw = strict_json.read(path, adopted.MAX_ADOPTED_BYTES)
    kind = raw.get("kind") if isinstance(raw, dict) else None
    return READERS.get(kind if isinstance(kind, str) else "", adopted.from_dict)(raw, str(path))
