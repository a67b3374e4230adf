"""Corpus metrics (f1, mcc): lm-eval aggregates a task's (gold, prediction) pairs over the whole set with
scikit-learn, and estimates their stderr by a seeded bootstrap. Re-derived here with our own code, bit for
bit (SOURCE_MAP steps 65-67):

- f1 is sklearn's binary f1 of class 1, 2 tp / (2 tp + fp + fn), 0.0 when that denominator is 0; mcc is
  sklearn's matthews_corrcoef from the confusion counts. Every count is an exact integer, so one division
  (and one correctly rounded sqrt) gives the very float sklearn gives.
- the bootstrap (lm_eval/api/metrics.py bootstrap_stderr) draws `iters // chunk` chunks of `chunk =
  min(1000, iters)` resamples; chunk i uses random.Random(i), each resample `rnd.choices(items, k=n)`, i.e.
  n draws of floor(random() * n). Python's random() is MT19937's 53-bit double, which numpy's legacy
  RandomState also produces: seeded with Python's own state for seed i, it yields the same indices a
  chunk at a time. The stderr is the sample standard deviation of all resampled values, in lm-eval's
  order of operations.
"""

import math
import random


BOOTSTRAP_ITERS = 100000  # simple_evaluate's default; a profile may pin another (settings.bootstrap_iters)


def f1_binary(golds, preds) -> float:
    tp = sum(1 for g, p in zip(golds, preds) if g == 1 and p == 1)
    denominator = sum(1 for g in golds if g == 1) + sum(1 for p in preds if p == 1)
    return 0.0 if denominator == 0 else 2 * tp / denominator


def mcc(golds, preds) -> float:
    n, labels = len(golds), sorted(set(golds) | set(preds))
    t_sum = [sum(1 for g in golds if g == k) for k in labels]
    p_sum = [sum(1 for p in preds if p == k) for k in labels]
    correct = sum(1 for g, p in zip(golds, preds) if g == p)
    cov_ytyp = correct * n - sum(t * p for t, p in zip(t_sum, p_sum))
    cov_ypyp = n * n - sum(p * p for p in p_sum)
    cov_ytyt = n * n - sum(t * t for t in t_sum)
    product = cov_ypyp * cov_ytyt
    return 0.0 if product == 0 else cov_ytyp / math.sqrt(product)


def _f1_rows(golds, preds):
    import numpy as np  # numpy only where a corpus metric is computed: every command starts without it

    tp = ((golds == 1) & (preds == 1)).sum(axis=1)
    denominator = (golds == 1).sum(axis=1) + (preds == 1).sum(axis=1)
    return np.where(denominator == 0, 0.0, 2 * tp / np.maximum(denominator, 1))


def _mcc_rows(golds, preds):
    import numpy as np

    n = golds.shape[1]
    labels = np.unique(np.concatenate([golds.ravel(), preds.ravel()]))
    t_sum = np.stack([(golds == k).sum(axis=1) for k in labels])
    p_sum = np.stack([(preds == k).sum(axis=1) for k in labels])
    correct = (golds == preds).sum(axis=1)
    cov_ytyp = correct * n - (t_sum * p_sum).sum(axis=0)
    product = (n * n - (p_sum * p_sum).sum(axis=0)) * (n * n - (t_sum * t_sum).sum(axis=0))
    return np.where(product == 0, 0.0, cov_ytyp / np.sqrt(np.maximum(product, 1).astype(np.float64)))


ROWS = {"f1": _f1_rows, "mcc": _mcc_rows}  # each statistic over a (resamples, n) array at once


def _python_generator_state(seed: int):
    """numpy's legacy MT19937 (a RandomState) in exactly the state random.Random(seed) starts in."""
    import numpy as np

    state = random.Random(seed).getstate()[1]
    generator = np.random.RandomState()
    # numpy's stubs want all five fields; its set_state takes the three of random.Random's state and zeros the rest
    generator.set_state(("MT19937", np.array(state[:624], dtype=np.uint32), state[624]))  # type: ignore[arg-type]
    return generator


def resampled(statistic: str, items: list, iters: int) -> list:
    """Every bootstrap value lm-eval computes, in its order."""
    import numpy as np

    golds = np.array([int(g) for g, _ in items], dtype=np.int64)
    preds = np.array([int(p) for _, p in items], dtype=np.int64)
    n, chunk, values = len(items), min(1000, iters), []
    for seed in range(iters // chunk):
        draws = _python_generator_state(seed).random_sample((chunk, n))
        positions = np.floor(draws * float(n)).astype(np.int64)  # rnd.choices: floor(random() * n)
        values.extend(ROWS[statistic](golds[positions], preds[positions]).tolist())
    return values


def sample_stddev(values: list) -> float:
    """lm-eval's sample_stddev, in its order of operations."""
    mean = sum(values) / len(values)
    return math.sqrt(sum([(x - mean) ** 2 for x in values]) / (len(values) - 1))


def bootstrap_stderr(statistic: str, items: list, iters: int) -> float:
    return sample_stddev(resampled(statistic, items, iters))
