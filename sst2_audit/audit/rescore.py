"""Level 3, rescore: re-run the independent forward pass for N rows, compare bit for bit."""

from pathlib import Path

from ..dataset import read_parquet
from ..drift import IDENTICAL, DRIFT, judge
from ..numeric import fingerprint, numeric_key, one_line
from ..protocol import predict
from ..errors import CheckFailed
from ..independent import IndependentScorer, encode_question
from ..model import load as load_model
from ..manifest import read_manifest, require_matching, verify_files
from ..progress import phase
from .findings import LevelResult
from .loading import RunFolder


def check(run: RunFolder, cache: Path, rows: int) -> LevelResult:
    import torch

    result = LevelResult(f"rescore ({rows} rows)")
    record, lock = run.record, run.lock
    if record is None:
        result.skipped = "the run has no run record"
        return result
    manifest = require_matching(read_manifest(cache), Path(cache), lock, lock.profile(record.profile))
    try:
        verify_files(cache, manifest, roles=("model", "validation"))  # hash before load
    except CheckFailed as error:
        result.fail(str(error))
        return result
    settings = lock.run_settings
    torch.set_num_threads(settings["threads"])
    with phase("rescore: load model"):
        model, tokenizer = load_model(Path(cache) / "model", settings)
    by_idx = {row.idx: row for row in read_parquet(Path(cache) / manifest.file("validation").path)}
    scorer = IndependentScorer(model, settings["max_length"])
    here = fingerprint(settings["numeric_mode"], settings["threads"])
    same_platform = numeric_key(here) is not None and numeric_key(here) == numeric_key(record.platform)
    pairs = {}
    with phase(f"rescore: {rows} forward passes"):
        for question in record.questions[:rows]:
            encoded = encode_question(tokenizer, by_idx[question.idx].sentence, question.idx, settings["max_length"])
            pairs[question.idx] = (list(question.independent_scores),
                                   list(scorer.score(question.idx, encoded).candidate_scores))
    verdict = judge(pairs, same_platform, predict)
    result.checks += verdict.compared
    result.notes.append(verdict.line())
    if not same_platform:
        result.notes.append(f"run's platform:  {one_line(record.platform)}")
        result.notes.append(f"this platform:   {one_line(here)}")
    if verdict.verdict not in (IDENTICAL, DRIFT):
        for idx, (claimed, rescored) in pairs.items():
            if claimed != rescored:
                result.problems.append(f"row idx {idx}: independent_scores (rescored): expected {rescored!r}, "
                                       f"got {claimed!r}")
    return result
