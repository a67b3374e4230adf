"""The adoption's implementation per task shape, keyed by the shape's name (task/shapes.py picks the shape)."""

from sst2_audit.audit.adopt_choice import ChoiceAdoption
from sst2_audit.audit.adopt_decode import DecodeAdoption
from sst2_audit.audit.adopt_rolling import RollingAdoption
from sst2_audit.audit.adopt_shape import AdoptShape

ADOPT_SHAPES: dict[str, AdoptShape] = {"multiple_choice": ChoiceAdoption(), "generate_until": DecodeAdoption(),
                                       "loglikelihood_rolling": RollingAdoption()}


def shape_for(spec) -> AdoptShape:
    return ADOPT_SHAPES[spec.shape.name]
