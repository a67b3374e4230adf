"""The scoring protocol, stated once, for every task (the task itself is data: task/spec.py).

The task's own number of shots (the lock's or the YAML's num_fewshot; task/fewshot.py draws them as
lm-eval does), no chat template and no system prompt unless the profile sets lm-eval's chat settings (task/chat.py
renders the model's pinned template), no BOS/EOS added unless the lock's profile says
add_bos_token; a candidate's score is the sum of its tokens' log-probabilities; `acc` predicts the
argmax of the scores, `acc_norm` the argmax of score / (characters of the choice), ties going to the
first candidate in both; accuracy is the mean of the per-question 0/1 (other metrics: metrics.py).
"""

import math

from sst2_audit.util import json_text
from sst2_audit.util.hashing import sha256_text

# Fixed choices of the protocol, recorded with the lock's run settings in every run.json (a profile's chat settings
# replace the first two: task/fewshot.py::protocol_settings).
PROTOCOL_SETTINGS = {"apply_chat_template": False, "system_instruction": None,
                     "length_normalization": False, "tie_rule": "first candidate"}


def notice_for(profile) -> str:
    """What every output of a run says about what it measured: the lock's profile decides, one rule for every
    task (a demo profile's own notice, else words that name what it is not)."""
    if profile.demo:
        return profile.notice or f"DEMO: profile {profile.name}; not a measurement of {profile.task}."
    return profile.description


def prompt_hash(context: str) -> str:
    """sha256 of the exact context string (lm-eval logs the same as prompt_hash)."""
    return sha256_text(context)


def doc_hash(doc: dict) -> str:
    """sha256 of the document as lm-eval serialises it for its doc_hash."""
    return sha256_text(doc_json(doc))


def doc_json(doc: dict) -> str:
    """json.dumps(doc, indent=2, ensure_ascii=False), the same text (util/json_text.py: an adoption hashes two docs a
    row, and json's indented writer took about a third of a 73,584-row model-free adoption)."""
    return json_text.indented(doc, sort_keys=False)


def predict(candidate_scores) -> int:
    """Index of the highest score; a tie goes to the first candidate (strict >)."""
    best = 0
    for index, score in enumerate(candidate_scores):
        if score > candidate_scores[best]:
            best = index
    return best


def predict_norm(candidate_scores, choice_lengths) -> int:
    """acc_norm's prediction: argmax of score / len(choice) in characters, ties to the first.

    lm-eval divides float64 arrays (numpy); Python floats are the same IEEE doubles.
    """
    if any(length <= 0 for length in choice_lengths):
        raise ValueError(f"acc_norm needs non-empty choices, got lengths {list(choice_lengths)}")
    return predict([score / float(length) for score, length in zip(candidate_scores, choice_lengths)])


def accuracy(correct: list) -> float:
    return sum(correct) / len(correct)


def accuracy_stderr(correct: list) -> float:
    """Sample standard deviation over sqrt(n), in lm-eval's order of operations."""
    if len(correct) < 2:
        return float("nan")
    mean = sum(correct) / len(correct)
    deviation = math.sqrt(sum((x - mean) ** 2 for x in correct) / (len(correct) - 1))
    return deviation / math.sqrt(len(correct))


def pairwise_sum(values: list) -> float:
    """np.sum of a contiguous float64 array, in numpy's order (pairwise_sum_DOUBLE): under 8 values one by
    one from 0.0; up to 128, eight running sums combined as ((0+1)+(2+3))+((4+5)+(6+7)), then the remainder;
    above, the two halves (split at a multiple of 8) summed apart. tests/protocol/test_mc2.py holds it to np.sum."""
    count = len(values)
    if count < 8:
        total = 0.0
        for value in values:
            total += value
        return total
    if count <= 128:
        sums, end = list(values[:8]), count - count % 8
        for start in range(8, end, 8):
            for lane in range(8):
                sums[lane] += values[start + lane]
        total = ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]))
        for value in values[end:]:
            total += value
        return total
    half = count // 2
    half -= half % 8
    return pairwise_sum(values[:half]) + pairwise_sum(values[half:])


def mc2_mass_exact_sums(candidate_scores, true_choices) -> float:
    """mc2 as records before schema 5 re-derived it (math.exp, exactly rounded sums): only so that their
    cards, which print its largest difference from lm-eval's values, regenerate byte for byte."""
    probabilities = [math.exp(score) for score in candidate_scores]
    total = math.fsum(probabilities)
    return math.fsum(probabilities[index] / total for index in true_choices)


def mc2_mass(candidate_scores, true_choices) -> float:
    """truthfulqa's mc2, re-derived in the hook's order of operations so that it rounds as lm-eval does: exp of
    each log-likelihood (numpy's exp, the elementary function the hook calls), their sum, each divided by it,
    the true ones summed (true_choices ascending, as the hook's mask selects them), sums in numpy's pairwise
    order. Without shifting the scores first, as the hook: a question whose every probability underflows to
    0.0 has no mc2 (lm-eval logs NaN there), which is bad input here."""
    import numpy as np  # the hook's exp: numpy's own SIMD exp on AVX-512F CPUs, libm's elsewhere

    with np.errstate(over="ignore", under="ignore"):
        probabilities = [float(p) for p in np.exp(np.array(candidate_scores, dtype=np.float64))]
    if math.inf in probabilities:  # a score above 709.78: not a log-likelihood (lm-eval: inf / inf = NaN)
        raise ValueError("a score above 709 overflows exp(): mc2 is undefined (NaN in lm-eval)")
    total = pairwise_sum(probabilities)
    if total == 0.0:
        raise ValueError("every choice's probability exp(score) underflows to 0.0: mc2 is undefined (NaN in lm-eval)")
    normalised = [probability / total for probability in probabilities]
    return pairwise_sum([normalised[index] for index in sorted(true_choices)])
