"""The samples file of a plain lm-eval run read as a stream (issue 62): one line in memory at a time, each sample's text
reduced to its sha256 digests as it is read (kept only for an export), the file's own sha256 taken on the way, and
lm-eval's stringified log-likelihoods read exactly (the float's own repr). The file is the real lm-eval 0.4.4 run of
tests/data/lm-eval-0.4.4."""

import hashlib
import json
import random
import shutil

import pytest

from sst2_audit.formats import strict_json
from sst2_audit.formats.lm_eval_output import read_plain_files, read_plain_sample
from sst2_audit.protocol.rules import doc_hash
from sst2_audit.util.errors import InputError
from support.paths import REPO

RUN = REPO / "tests" / "data" / "lm-eval-0.4.4"
RESULTS, SAMPLES = next(RUN.glob("results_*.json")), next(RUN.glob("samples_*"))
LINES = [json.loads(line) for line in SAMPLES.read_text().splitlines()]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_text_is_read_as_digests_and_kept_only_when_asked():
    digested = read_plain_files(RESULTS, SAMPLES, "sst2", ("acc",), public=False)
    kept = read_plain_files(RESULTS, SAMPLES, "sst2", ("acc",), public=False, keep_text=True)
    assert digested.samples_sha256 == kept.samples_sha256 == hashlib.sha256(SAMPLES.read_bytes()).hexdigest()
    assert len(digested.samples) == len(LINES) == 16
    for sample, text, line in zip(digested.samples, kept.samples, LINES):
        assert (sample.doc, sample.arguments, sample.target) == (None, None, None)
        assert text.doc == line["doc"] and text.target == line["target"]
        assert text.arguments == [(pair["arg_0"], pair["arg_1"]) for pair in line["arguments"].values()]
        assert sample.logged == text.logged
        assert sample.logged.doc_hash == doc_hash(line["doc"]) == line["doc_hash"]
        assert sample.logged.contexts == [sha(pair["arg_0"]) for pair in line["arguments"].values()]
        assert sample.logged.contexts[0] == line["prompt_hash"]
        assert sample.logged.continuations == [sha(" negative"), sha(" positive")]
        assert sample.logged.target == sha(line["target"]) == line["target_hash"]


@pytest.mark.parametrize("seed", range(12))
def test_a_log_likelihood_is_read_only_as_the_floats_own_repr(seed):
    """lm-eval writes str(float); any other spelling Python's float() would take is refused, naming the field."""
    rng = random.Random(seed)
    line = json.loads(json.dumps(LINES[rng.randrange(len(LINES))]))
    candidate, text = rng.randrange(2), rng.choice(["resps", "filtered_resps"])
    logged = line["resps"][candidate][0][0]
    dot = logged.index(".")
    signed = f"{logged[0]}0{logged[1:]}" if logged.startswith("-") else f"+{logged}"
    spelled = rng.choice([f" {logged}", f"{logged}\t", f"{logged}0" if "e" not in logged else f"{logged[:-1]}+0",
                          signed, logged[:dot + 2] + "_" + logged[dot + 2:], f"{float(logged):.20f}"])
    assert spelled != logged and float(spelled.replace("_", "")) == pytest.approx(float(logged))
    if text == "resps":
        line["resps"][candidate][0][0] = spelled
        field = f"resps[{candidate}][0][0]"
    else:
        line["filtered_resps"][candidate][0] = spelled
        field = f"filtered_resps[{candidate}][0]"
    with pytest.raises(InputError) as refused:
        read_plain_sample(line, "s.jsonl:1", ("acc",), legacy=True)
    assert str(refused.value) == (f"s.jsonl:1.{field}: expected a log-likelihood as Python writes a float, got "
                                  f"{spelled!r}.")
    assert read_plain_sample(LINES[0], "s.jsonl:1", ("acc",), legacy=True).scores[0] == float(
        LINES[0]["resps"][0][0][0])


def test_lines_stream_skips_blank_lines_and_hashes_every_byte(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n\n  \n{"b": [2]}\n')
    lines = strict_json.Lines(path, 1 << 20)
    assert list(lines) == [(1, {"a": 1}), (4, {"b": [2]})]
    assert lines.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and lines.size == path.stat().st_size


def test_lines_stream_limits_the_file_and_each_line(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": "' + b"x" * 100 + b'"}\n')
    with pytest.raises(InputError, match=r"s.jsonl: 110 bytes, more than the limit of 50 for a record\."):
        list(strict_json.Lines(path, 50))
    monkeypatch.setattr(strict_json, "MAX_LINE_BYTES", 64)
    with pytest.raises(InputError, match=r"s.jsonl:1: a line of more than 64 bytes\."):
        list(strict_json.Lines(path, 1 << 20))
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    with pytest.raises(InputError, match="expected a regular file, got a symbolic link"):
        list(strict_json.Lines(link, 1 << 20))


@pytest.mark.parametrize("text, refused", [
    ("[" * 66 + "]" * 66, True),  # the outermost is level 0: 66 containers reach level 65
    ('{"a": ' + "[" * 65 + "]" * 65 + "}", True),
    ('{"a": "' + "[" * 200 + '", "b": [[1]]}', False),  # brackets inside a string nest nothing
    ("[" * 65 + "]" * 65, False),
    (json.dumps([[k] for k in range(200)]), False),  # 201 brackets, two deep
])
def test_depth_is_checked_whatever_the_bracket_count(text, refused):
    if refused:
        with pytest.raises(InputError, match="nested deeper than 64 levels"):
            strict_json.loads(text.encode(), "x")
    else:
        assert strict_json.loads(text.encode(), "x") == json.loads(text)


def test_a_duplicate_key_is_named_at_any_depth():
    with pytest.raises(InputError, match=r"x: not acceptable JSON \(duplicate key 'b'\)"):
        strict_json.loads(b'{"a": [{"b": 1, "c": 2, "b": 3}]}', "x")


def test_a_public_copy_line_with_text_is_refused(tmp_path):
    public = dict(LINES[0])
    public.pop("arguments")
    with pytest.raises(InputError, match=r"p:1: a public copy holds no doc, arguments or target \(data text\)\."):
        read_plain_sample(public, "p:1", ("acc",), public=True, legacy=True)


def test_a_samples_file_is_read_whatever_its_line_endings(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    samples = next(folder.glob("samples_*"))
    samples.write_bytes(samples.read_bytes().replace(b"\n", b"\r\n"))
    output = read_plain_files(next(folder.glob("results_*")), samples, "sst2", ("acc",), public=False)
    assert [s.doc_id for s in output.samples] == list(range(16))
    assert output.samples_sha256 == hashlib.sha256(samples.read_bytes()).hexdigest()


def _planted(target, kind: str) -> None:
    """Something other than a regular file put under a file's name, as a hostile folder holds it."""
    import os

    target.unlink()
    if kind == "link to a device":
        target.symlink_to("/dev/zero")
    elif kind == "link to a copy":
        copy = target.with_name("elsewhere")
        copy.write_bytes(b"{}\n")
        target.symlink_to(copy)
    elif kind == "folder":
        target.mkdir()
    else:
        os.mkfifo(target)


KINDS = {"link to a device": "a symbolic link", "link to a copy": "a symbolic link", "folder": "a folder",
         "pipe": "a named pipe"}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("role", ["lm-eval samples", "lm-eval results", "lighteval details"])
def test_a_link_folder_or_pipe_under_a_run_s_file_name_is_named_never_read_and_never_a_wrong_hint(tmp_path, kind,
                                                                                                   role):
    """Each file a run is found by, replaced by each kind of non-file: refused naming the entry and what it is (a pipe
    is never opened, so nothing waits on it), not passed over as a run that logged no samples (the --log_samples
    hint), not read through a link."""
    from sst2_audit.formats import lighteval_details, lm_eval_run

    if role.startswith("lighteval"):
        shutil.copytree(REPO / "tests" / "data" / "lighteval-0.13.0", tmp_path / "run")
        target = next((tmp_path / "run" / "details").rglob("*.parquet"))
        find = lambda: lighteval_details.read_run(tmp_path / "run", None)  # noqa: E731
    else:
        shutil.copytree(RUN, tmp_path / "run")
        target = next((tmp_path / "run").glob(("samples_*" if role.endswith("samples") else "results_*")))
        find = lambda: lm_eval_run.read_plain_output(tmp_path / "run", "sst2", ("acc",))  # noqa: E731
    _planted(target, kind)
    with pytest.raises(InputError) as refused:
        find()
    assert str(refused.value) == f"{target}: expected a regular file, got {KINDS[kind]}.", str(refused.value)


@pytest.mark.parametrize("which", ["results", "samples"])
def test_a_run_file_whose_name_is_not_lm_eval_s_text_is_refused_naming_it(tmp_path, which):
    """A byte that is not UTF-8 in a results file's date (lm-eval writes it in ASCII) or a samples file's task name
    (text of the task's YAML): the name could be neither recorded nor bundled (it was exit 3, after the verdict was
    printed), so the run is refused naming the file, exit 2."""
    import os

    from sst2_audit.formats import lm_eval_run

    shutil.copytree(RUN, tmp_path / "run")
    if which == "results":
        for path in list((tmp_path / "run").iterdir()):
            path.rename(path.with_name(path.name.replace("2026-12-06T15-04-17.226634", os.fsdecode(b"2026\xff"))))
        expected = "whose date lm-eval writes in ASCII"
    else:
        shutil.copy(next((tmp_path / "run").glob("samples_*")),
                    tmp_path / "run" / os.fsdecode(b"samples_t\xff_2026-12-06T15-04-17.226634.jsonl"))
        expected = "a samples file whose name is not UTF-8"
    with pytest.raises(InputError) as refused:
        lm_eval_run.read_run_index(tmp_path / "run")
    assert expected in str(refused.value)
