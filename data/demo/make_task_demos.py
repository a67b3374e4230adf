"""Writes the two extra embedded demo sets from templates written for sst2-audit (no third-party text).

    python data/demo/make_task_demos.py    # rewrites rte/*.jsonl and inverse_scaling/train.jsonl

The output is committed and pinned by sha256 in resources.lock.json; this script only documents
how it was made (a fixed seed, so it writes the same bytes again). Every set is a DEMO of the audit
machinery, not a measurement of GLUE RTE or of any inverse-scaling task.
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 94

PEOPLE = ["Mara", "Tobias", "Ines", "Okello", "Priya", "Jonas", "Leilani", "Farid", "Greta", "Hugo", "Aiko", "Bram"]
PLACES = ["the harbour town", "a mountain village", "the old mill", "the night market", "a river island",
          "the glass museum", "a wind farm", "the chess club", "the bakery on Elm Street", "a research station"]
THINGS = ["a blue kite", "three maps", "a brass key", "a wooden boat", "two lanterns", "a violin", "a red scarf",
          "a jar of honey", "a telescope", "a stack of letters"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _rte_row(rng: random.Random, idx: int) -> dict:
    """A premise and a hypothesis that either follows from it (label 0, "True") or does not (1, "False")."""
    who, other = rng.sample(PEOPLE, 2)
    place, thing, day = rng.choice(PLACES), rng.choice(THINGS), rng.choice(DAYS)
    wrong_place = rng.choice([p for p in PLACES if p != place])
    wrong_day = rng.choice([d for d in DAYS if d != day])
    premise = rng.choice([
        f"On {day}, {who} carried {thing} to {place}, where {other} was waiting.",
        f"{who} spent {day} at {place} and left {thing} with {other}.",
        f"After a long walk, {who} reached {place} on {day} with {thing}.",
    ])
    entailed = rng.random() < 0.5
    if entailed:
        hypothesis = rng.choice([f"{who} was at {place}.", f"{who} had {thing} on {day}.",
                                 f"{who} went to {place} on {day}."])
    else:
        hypothesis = rng.choice([f"{who} was at {wrong_place}.", f"{who} went to {place} on {wrong_day}.",
                                 f"{who} never saw {thing}."])
    return {"sentence1": premise, "sentence2": hypothesis, "label": 0 if entailed else 1, "idx": idx}


def _number_words(rng: random.Random) -> tuple:
    return rng.randint(11, 99), rng.randint(11, 99)


def _inverse_scaling_row(rng: random.Random) -> dict:
    """A redefined operator: the instruction's meaning is right, the habitual one wrong. Answers
    are multi-digit numbers with a leading space (empty target_delimiter), so several tokens."""
    a, b = _number_words(rng)
    word, redefined, habitual = rng.choice([
        ("plus", a * b, a + b), ("times", a + b, a * b), ("minus", a + b, a - b), ("plus", a - b, a + b),
    ])
    meaning = {a * b: "multiplication", a + b: "addition", a - b: "subtraction"}[redefined]
    prompt = (f"In this puzzle the word '{word}' means {meaning}, whatever it usually means.\n"
              f"Q: What is {a} {word} {b}?\nA:")
    classes = [f" {redefined}", f" {habitual}"]
    answer = 0
    if rng.random() < 0.5:  # the right answer is not always first
        classes.reverse()
        answer = 1
    return {"prompt": prompt, "classes": classes, "answer_index": answer}


def _write(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


def main() -> None:
    rng = random.Random(SEED)
    _write(HERE / "rte" / "validation.jsonl", [_rte_row(rng, i) for i in range(264)])
    _write(HERE / "rte" / "train.jsonl", [_rte_row(rng, i) for i in range(32)])
    questions = {}
    while len(questions) < 264:  # no question twice
        row = _inverse_scaling_row(rng)
        questions.setdefault(row["prompt"], row)
    _write(HERE / "inverse_scaling" / "train.jsonl", list(questions.values()))


if __name__ == "__main__":
    main()
