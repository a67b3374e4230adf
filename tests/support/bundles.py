"""What the tests that forge or read bundles share: the reference bundles, an in-process audit, and packing
a bundle as a submitter could (any content, SHA256SUMS recomputed)."""

import gzip
import hashlib
import io
import json
import tarfile

from support.paths import LOCK, REPO
from sst2_audit.cli import audit_main
from sst2_audit.formats import records
from sst2_audit.formats.lock import load_lock
from sst2_audit.pages import card
from sst2_audit.pages.html_report import OLDEST_SCHEMA, render
from sst2_audit.task.spec import spec_for

# The attacks edit a record schema 3 bundle: the reference made before the strict numeric mode (a user's older
# bundle, which the reviewer's lock accepts with its mode named). CURRENT is today's reference (schema 4).
REFERENCE = REPO / "tests" / "data" / "amd-avx2-mode-reference.tar.gz"
CURRENT = REPO / "results" / "embedded-full-reference.tar.gz"
TOP = "embedded-full-reference"


def audit(capsys, *args):
    code = audit_main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def members_of(bundle) -> dict:
    with tarfile.open(bundle) as archive:
        return {m.name.split("/", 1)[1]: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def pack(target, members: dict, top: str = TOP, sums: bool = True) -> None:
    """Pack like a submitter: any content, with a SHA256SUMS that matches it."""
    members = dict(members)
    if sums:
        members["SHA256SUMS"] = "".join(f"{hashlib.sha256(body).hexdigest()}  {name}\n"
                                        for name, body in sorted(members.items()) if name != "SHA256SUMS").encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for name, body in sorted(members.items()):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    target.write_bytes(gzip.compress(raw.getvalue()))


def edited(change, bundle=REFERENCE) -> dict:
    members = members_of(bundle)
    record = json.loads(members["run.json"])
    change(record, members)
    members["run.json"] = json.dumps(record, indent=2).encode()
    return members


def regenerate_card(members: dict) -> None:
    """The submitter regenerates the card and the page from the forged record, so only the rescore can catch it."""
    record = records.from_dict(records.RunRecord, json.loads(members["run.json"]), "run.json")
    written = json.loads(members["run.json"])["schema_version"]
    members["CARD.md"] = card.render(record, load_lock(LOCK), written).encode()
    if "report.html" in members and written >= OLDEST_SCHEMA:  # and the page (schema 3's is a claim, unchecked)
        members["report.html"] = render(record, load_lock(LOCK), spec_for(load_lock(LOCK), record.task),
                                        written_schema=written).encode()


def forge_every_row(delta: float, platform_change):
    """Every candidate score moved by delta on both paths and in lm-eval's samples (predictions and sums
    unchanged), the platform claim edited, and the card and page regenerated: consistent in itself."""
    def forge(record, members):
        for question in record["questions"]:
            if "scores" in question:  # record schema 4
                question["scores"]["official"] = [s + delta for s in question["scores"]["official"]]
                question["scores"]["independent"] = list(question["scores"]["official"])
            else:
                question["official_scores"] = [s + delta for s in question["official_scores"]]
                question["independent_scores"] = list(question["official_scores"])
        scores = {q["idx"]: q["scores"]["official"] if "scores" in q else q["official_scores"] for q in record["questions"]}
        samples = [json.loads(line) for line in members["lm_eval_samples.public.jsonl"].splitlines()]
        for sample in samples:
            for number, score in enumerate(scores[sample["doc_id"]]):
                sample["resps"][number][0][0] = score
                if "filtered_resps" in sample:
                    sample["filtered_resps"][number][0] = score
        members["lm_eval_samples.public.jsonl"] = "".join(json.dumps(s) + "\n" for s in samples).encode()
        platform_change(record["platform"])
        environment = json.loads(members["environment.json"])
        environment["platform"] = record["platform"]
        members["environment.json"] = json.dumps(environment).encode()
    return forge
