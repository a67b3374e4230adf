"""study.json: a paired protocol-sensitivity study (protocol/study.py), its variants cited by sha256."""

from dataclasses import dataclass

STUDY_FILE = "study.json"
STUDY_PAGE = "study.html"


@dataclass
class StudyVariant:
    profile: str
    run: str  # its run folder inside the study's folder (the profile's name)
    run_sha256: str  # of its run.json
    settings: dict  # the profile's own settings in the lock (what makes it a variant: num_fewshot, seed, ...)


@dataclass
class StudyRecord:
    run_name: str
    lock_sha256: str
    task: str
    demo: bool
    notice: str
    variants: list[StudyVariant]  # the base first
    numbers: dict  # protocol.study.study_numbers of the variants' records
    schema_version: int = 1
    kind: str = "sst2-audit/study"
