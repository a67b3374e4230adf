"""Level 3, rescore: re-run the independent forward pass for N rows, compare bit for bit."""

from pathlib import Path

from ..dataset import read_parquet
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
    with phase(f"rescore: {rows} forward passes"):
        for question in record.questions[:rows]:
            pairs = encode_question(tokenizer, by_idx[question.idx].sentence, question.idx, settings["max_length"])
            scores = list(scorer.score(question.idx, pairs).candidate_scores)
            result.expect(f"row idx {question.idx}", "independent_scores (rescored)", scores, question.independent_scores)
    return result
