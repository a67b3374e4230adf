"""Issue 29: public means no data text, for every task shape.

Generated markers: every text value of every row of each demo schema (multiple input, struct and list
columns, mc2 targets, shots) gets a unique marker; the data is pinned with a tiny model, run, audited
and bundled; no marker may reach any public file or bundle member (the private records hold them).
"""

import json
import re

import pytest

from support.builders import tiny_model_folder
from support.paths import DEMOS, REPO
from support.processes import run_script
from support.bundles import members_of

MARKER = re.compile(r"qz\d{6}x")
KEPT = {"answer", "answerKey", "label", "labels", "subject"}  # what decides the gold index, not text a row carries
SCHEMAS = {  # task: (demo folder, extra pin options)
    "winogrande": ("winogrande", ["--num-fewshot", "2"]),  # multiple input: the target is the text after the blank
    "arc_challenge": ("arc", ["--num-fewshot", "2"]),  # a struct column of choices
    "truthfulqa_mc2": ("truthfulqa", []),  # mc2 targets, its process_results hook
    "mmlu_college_mathematics": ("mmlu/college_mathematics", []),  # a list column, shots from dev (first_n)
}


@pytest.fixture(scope="module")
def tiny_model(embedded_cache, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-model")
    return tiny_model_folder(folder, 11, embedded_cache)


def _marked(value, key, counter):
    if key in KEPT:
        return value
    if isinstance(value, str):
        counter[0] += 1
        return f"{value} qz{counter[0]:06d}x"
    if isinstance(value, list):
        return [_marked(item, key, counter) for item in value]
    if isinstance(value, dict):
        return {k: _marked(v, k, counter) for k, v in value.items()}
    return value


def _marked_copy(source, target) -> int:
    target.mkdir(parents=True)
    counter = [0]
    for path in sorted(source.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        (target / path.name).write_text("".join(json.dumps(_marked(r, None, counter)) + "\n" for r in rows))
    return counter[0]


@pytest.mark.parametrize("task", sorted(SCHEMAS))
def test_no_data_text_reaches_a_public_record_or_bundle(tiny_model, tmp_path, task):
    folder, options = SCHEMAS[task]
    assert _marked_copy(REPO / "data" / "demo" / folder, tmp_path / "data") > 500
    lock, name = tmp_path / "locks" / "mk.lock.json", "mk"
    env = {"SST2_AUDIT_MK_MODEL": str(tiny_model)}
    done = run_script("prepare.py", "--lock", DEMOS, "--pin", name, "--task", task, "--model", tiny_model,
                      "--data", tmp_path / "data", "--new-lock", lock, *options, env=env)
    assert done.returncode == 0, done.stderr
    done = run_script("prepare.py", "--lock", lock, "--profile", name, "--cache", tmp_path / "cache", env=env)
    assert done.returncode == 0, done.stderr
    done = run_script("run.py", "--lock", lock, "--profile", name, "--cache", tmp_path / "cache", "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "mk", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    done = run_script("audit.py", "--lock", lock, "--out", tmp_path / "out", "--cache", tmp_path / "cache",
                      "--bundle", "--results", tmp_path / "results", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    done = run_script("audit.py", "--lock", lock, "--bundle-file", tmp_path / "results" / "mk.tar.gz",
                      "--cache", tmp_path / "cache", env=env)
    assert done.returncode == 0, done.stdout + done.stderr  # the bundle passes its own audit
    public = {f"out/{p.name}": p.read_bytes() for p in (tmp_path / "out").iterdir()}
    public.update({f"bundle/{n}": body for n, body in members_of(tmp_path / "results" / "mk.tar.gz").items()})
    for where, body in public.items():
        found = MARKER.search(body.decode("utf-8", errors="replace"))
        assert found is None, f"{task}: {where} publishes data text ({found.group(0)})"
    private = "".join(p.read_text(errors="replace") for p in (tmp_path / "private").iterdir() if p.is_file())
    assert MARKER.search(private), "the markers must reach the model (else this test proves nothing)"
