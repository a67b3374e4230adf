"""Writes the extra embedded demo sets from templates written for sst2-audit (no third-party text).

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


def _options(rng: random.Random, right: int, near: list) -> tuple:
    """Four distinct numeric options, the right one at a random letter; returns (choices, answer)."""
    options = {right}
    for candidate in near:
        if len(options) == 4:
            break
        if candidate >= 0:
            options.add(candidate)
    options = sorted(options, key=lambda _: rng.random())
    return [str(o) for o in options], options.index(right)


def _mmlu_elementary_mathematics(rng: random.Random) -> dict:
    a, b = rng.randint(12, 89), rng.randint(12, 89)
    if rng.random() < 0.5:
        question, right = f"What is {a} + {b}?", a + b
    else:
        a, b = max(a, b), min(a, b)
        question, right = f"What is {a} - {b}?", a - b
    choices, answer = _options(rng, right, [right + 1, right - 1, right + 10, right - 10, right + 2])
    return {"question": question, "subject": "elementary_mathematics", "choices": choices, "answer": answer}


def _mmlu_high_school_computer_science(rng: random.Random) -> dict:
    value = rng.randint(9, 1023)
    if rng.random() < 0.5:
        question = f"What is the decimal value of the binary number {value:b}?"
    else:
        question = f"What is the decimal value of the hexadecimal number {value:X}?"
    choices, answer = _options(rng, value, [value + 1, value - 1, value * 2, value + 8, value - 8])
    return {"question": question, "subject": "high_school_computer_science", "choices": choices, "answer": answer}


def _mmlu_college_mathematics(rng: random.Random) -> dict:
    a, m = rng.randint(100, 999), rng.randint(5, 13)
    question = f"What is the remainder when {a} is divided by {m}?"
    right = a % m
    choices, answer = _options(rng, right, [(right + k) % m for k in (1, 2, 3, 4)] + [right + m, right + 2 * m])
    return {"question": question, "subject": "college_mathematics", "choices": choices, "answer": answer}


MMLU_SUBJECTS = {"elementary_mathematics": _mmlu_elementary_mathematics,
                 "high_school_computer_science": _mmlu_high_school_computer_science,
                 "college_mathematics": _mmlu_college_mathematics}


def _unique(make, rng: random.Random, count: int, seen: set) -> list:
    rows = []
    while len(rows) < count:  # no question twice in a subject, dev and test together
        row = make(rng)
        if row["question"] not in seen:
            seen.add(row["question"])
            rows.append(row)
    return rows


ACTIVITIES = {  # an activity, how it starts, and endings: the first fits, the others do not
    "Repotting a plant": ("lifts a small plant out of its old pot",
                          ["loosens the roots and sets it in a larger pot of fresh soil.",
                           "paints the kitchen ceiling a bright [title] shade of blue.",
                           "starts the car and drives to the beach.",
                           "folds the plant into a paper airplane."]),
    "Tuning a guitar": ("sits on a stool holding an acoustic guitar",
                        ["turns a peg slowly while plucking the string until it rings true.",
                         "pours the guitar into a glass of water.",
                         "throws the stool across the [step] garden.",
                         "reads a map of the city aloud to the guitar."]),
    "Making tea": ("fills a kettle at the sink and sets it on the stove",
                   ["drops a tea bag into a cup and pours the hot water over it.",
                    "plants the kettle in the flower bed.",
                    "climbs onto the roof with the [title] cup.",
                    "irons the tea bag flat on the table."]),
    "Washing a bicycle": ("wheels a muddy bicycle onto the lawn",
                          ["sprays the frame with a hose and scrubs the chain with a brush.",
                           "bakes the bicycle in the oven for an hour.",
                           "wraps the hose around the [header] mailbox.",
                           "sings to the wheels until they turn blue."]),
    "Folding laundry": ("empties a basket of clean towels onto a bed",
                        ["folds each towel in half twice and stacks them in a pile.",
                         "hangs the bed from the ceiling fan.",
                         "sends the towels to the moon by [step] post.",
                         "eats the basket with a spoon."]),
    "Sharpening a pencil": ("picks up a blunt pencil from the desk",
                            ["twists it in a sharpener until the point is fine again.",
                             "plants the pencil in the garden to grow a tree.",
                             "pours soup into the [title] sharpener.",
                             "mails the desk to a friend."]),
}
DETAILS = ["on a sunny afternoon", "in a small kitchen", "at the end of the day", "after lunch", "in the garage",
           "while music plays", "beside an open window", "before the guests arrive"]


def _hellaswag_row(rng: random.Random, ind: int, split: str) -> dict:
    """A context and four endings in HellaSwag's columns; `label` is the right ending's index as text."""
    activity, who = rng.choice(sorted(ACTIVITIES)), rng.choice(PEOPLE)
    start, endings = ACTIVITIES[activity]
    ctx_a, ctx_b = f"{who} {start} {rng.choice(DETAILS)}.", rng.choice(["then", "Then", "after a moment"])
    order = list(range(4))
    rng.shuffle(order)
    return {"ind": ind, "activity_label": activity, "ctx_a": ctx_a, "ctx_b": f"{ctx_b} {who.lower()}",
            "ctx": f"{ctx_a} {ctx_b} {who.lower()}", "endings": [endings[k] for k in order],
            "source_id": f"demo~{ind}", "split": split, "split_type": "indomain", "label": str(order.index(0))}


def _hellaswag(rng: random.Random) -> tuple:
    """Train and validation rows, no context twice across both (a shot must never be its own question)."""
    seen, rows = set(), []
    while len(rows) < 48 + 264:
        row = _hellaswag_row(rng, len(rows), "train" if len(rows) < 48 else "val")
        if row["ctx"] not in seen:
            seen.add(row["ctx"])
            rows.append(row)
    return rows[:48], rows[48:]


REASONS = [  # (the blank's clause, whether it names the giver (1) or the receiver (2))
    ("had finished reading it", 1), ("wanted to read it next", 2), ("was moving house", 1),
    ("had asked for it twice", 2), ("no longer needed it", 1), ("was curious about it", 2),
    ("was leaving town", 1), ("had never seen one", 2),
]
GIFTS = ["the book", "the lamp", "the umbrella", "the chess set", "the bicycle", "the old radio", "the recipe"]


def _winogrande_row(rng: random.Random) -> dict:
    """A sentence with one blank and two people; `answer` names the option the blank refers to."""
    giver, receiver = rng.sample(PEOPLE, 2)
    reason, refers = rng.choice(REASONS)
    sentence = f"{giver} gave {rng.choice(GIFTS)} to {receiver} because _ {reason}."
    options = [giver, receiver] if rng.random() < 0.5 else [receiver, giver]
    right = giver if refers == 1 else receiver
    return {"sentence": sentence, "option1": options[0], "option2": options[1],
            "answer": "1" if options[0] == right else "2"}


def _winogrande(rng: random.Random) -> tuple:
    seen, rows = set(), []
    while len(rows) < 40 + 264:  # no sentence twice across both splits
        row = _winogrande_row(rng)
        if row["sentence"] not in seen:
            seen.add(row["sentence"])
            rows.append(row)
    return rows[:40], rows[40:]


def _arc_row(rng: random.Random, ident: str) -> dict:
    """A four-option question on invented measurements, in ARC's columns (choices as a struct of texts and
    labels, answerKey the right label)."""
    kind = rng.choice(["longest", "heaviest", "warmest", "fastest"])
    unit, noun = {"longest": ("cm", "rope"), "heaviest": ("g", "stone"), "warmest": ("degrees", "cup of water"),
                  "fastest": ("km/h", "cart")}[kind]
    values = rng.sample(range(10, 99), 4)
    names = rng.sample(PEOPLE, 4)
    question = (f"Four students measured a {noun} each: " +
                ", ".join(f"{who} {value} {unit}" for who, value in zip(names, values)) +
                f". Whose {noun} was the {kind}?")
    labels = ["A", "B", "C", "D"] if rng.random() < 0.8 else ["1", "2", "3", "4"]  # ARC uses both
    return {"id": ident, "question": question, "choices": {"text": names, "label": labels},
            "answerKey": labels[values.index(max(values))]}


SHAPES = [("triangle", 3), ("square", 4), ("pentagon", 5), ("hexagon", 6), ("octagon", 8)]


def _truthfulqa_row(rng: random.Random) -> dict:
    """A question with true and false answers in TruthfulQA's columns: mc1_targets has one true answer
    first, mc2_targets every true answer first (labels 1), then the false ones (labels 0)."""
    kind = rng.choice(["sum", "days", "corners", "minutes"])
    if kind == "sum":
        a, b = rng.randint(12, 89), rng.randint(12, 89)
        question = f"What is {a} plus {b}?"
        true = [f"{a} plus {b} is {a + b}.", f"The sum is {a + b}."]
        false = [f"{a} plus {b} is {a + b + rng.choice([1, 10])}.", f"The sum is {a * b}.", f"{a} plus {b} is {a - b}."]
    elif kind == "days":
        start, step = rng.randrange(7), rng.randint(2, 5)
        question = f"Which day comes {step} days after {DAYS[start]}?"
        right = DAYS[(start + step) % 7]
        true = [f"{right} comes {step} days after {DAYS[start]}.", f"It is {right}."]
        false = [f"It is {DAYS[(start + step + k) % 7]}." for k in rng.sample([1, 2, 3, 4, 5, 6], 3)]
    elif kind == "corners":
        shape, n = rng.choice(SHAPES)
        who = rng.choice(PEOPLE)
        question = f"{who} drew a {shape}. How many corners does it have?"
        true = [f"A {shape} has {n} corners."]
        false = [f"A {shape} has {m} corners." for m in rng.sample([m for m in range(2, 10) if m != n], 2)] + [
            f"A {shape} has no corners."]
    else:
        hours = rng.randint(2, 30)
        question = f"How many minutes are there in {hours} hours?"
        true = [f"There are {60 * hours} minutes in {hours} hours.", f"{hours} hours make {60 * hours} minutes."]
        false = [f"There are {100 * hours} minutes in {hours} hours.", f"There are {hours * 24} minutes."]
    if rng.random() < 0.3:
        true.append("I have no comment.")
    rng.shuffle(false)
    return {"question": question,
            "mc1_targets": {"choices": [true[0], *false[:3]], "labels": [1] + [0] * len(false[:3])},
            "mc2_targets": {"choices": true + false, "labels": [1] * len(true) + [0] * len(false)}}


def _mrpc_row(rng: random.Random, idx: int) -> dict:
    """Two sentences that say the same thing in other words (label 1) or differ in one detail (label 0)."""
    who, place, thing, day = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(THINGS), rng.choice(DAYS)
    first = f"On {day}, {who} carried {thing} to {place}."
    same = rng.random() < 0.5
    if same:
        second = rng.choice([f"{who} took {thing} to {place} on {day}.", f"{who} brought {thing} to {place} on {day}.",
                             f"It was on {day} that {who} carried {thing} to {place}."])
    else:
        second = rng.choice([f"{who} took {thing} to {rng.choice([p for p in PLACES if p != place])} on {day}.",
                             f"{who} took {thing} to {place} on {rng.choice([d for d in DAYS if d != day])}.",
                             f"{who} took {rng.choice([t for t in THINGS if t != thing])} to {place} on {day}."])
    return {"sentence1": first, "sentence2": second, "label": 1 if same else 0, "idx": idx}


def _cola_row(rng: random.Random, idx: int) -> dict:
    """A sentence that is well formed (label 1) or broken by agreement or word order (label 0)."""
    who, place, thing = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(THINGS)
    verb, wrong = rng.choice([("carries", "carry"), ("finds", "find"), ("paints", "paint"), ("sells", "sell")])
    good = rng.random() < 0.6
    if good:
        sentence = rng.choice([f"{who} {verb} {thing} at {place}.", f"At {place}, {who} {verb} {thing}."])
    else:
        sentence = rng.choice([f"{who} {wrong} {thing} at {place}.", f"{who} {thing} {verb} at {place}.",
                               f"At {place} {verb} {who} {thing} the."])
    return {"sentence": sentence, "label": 1 if good else 0, "idx": idx}


COLOURED = [("a lemon", "yellow"), ("the sky at noon", "blue"), ("fresh grass", "green"), ("a ripe tomato", "red"),
            ("coal", "black"), ("snow", "white"), ("an orange", "orange"), ("a plum", "purple")]


def _neqa_row(rng: random.Random) -> dict:
    """A negated question in the inverse-scaling schema: the answer is the choice that does NOT fit."""
    (thing, colour), (_, other) = rng.sample(COLOURED, 2)
    who, place = rng.choice(PEOPLE), rng.choice(PLACES)
    prompt = f"At {place}, {who} looked at {thing}.\nQ: Which colour is {thing} not?\nA:"
    classes = [f" {colour}", f" {other}"]
    rng.shuffle(classes)
    return {"prompt": prompt, "classes": classes, "answer_index": classes.index(f" {other}")}


def _quote_row(rng: random.Random) -> dict:
    """Repeat a sentence exactly: the right ending is the sentence's own last word, the wrong one a habitual one."""
    who, place, thing = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(THINGS)
    last, habit = rng.choice([("slowly", "quickly"), ("twice", "once"), ("backwards", "forwards"), ("sideways", "upright")])
    sentence = f"{who} carried {thing} to {place} {last}"
    prompt = f"Repeat my sentence back to me exactly.\nInput: {sentence}.\nOutput: {sentence.rsplit(' ', 1)[0]}"
    classes = [f" {last}.", f" {habit}."]
    rng.shuffle(classes)
    return {"prompt": prompt, "classes": classes, "answer_index": classes.index(f" {last}.")}


CAUSES = [("The floor was wet.", "Someone had mopped it.", "Someone had painted it."),
          ("The kettle whistled.", "The water had boiled.", "The water had frozen."),
          ("The lantern went dark.", "Its oil ran out.", "Its glass was cleaned."),
          ("The kite rose.", "The wind picked up.", "The rain stopped."),
          ("The bread was hard.", "It was left out overnight.", "It was baked that morning."),
          ("The room smelled of smoke.", "The toast had burned.", "The window was open.")]
EFFECTS = [("The boat sprang a leak.", "Water came in.", "The sails were folded."),
           ("The lights went out.", "The street went dark.", "The clock ran fast."),
           ("The violin string snapped.", "The music stopped.", "The audience arrived."),
           ("The jar of honey tipped over.", "Honey spread across the table.", "The honey turned to sugar."),
           ("The alarm rang at dawn.", "The sleeper woke up.", "The sleeper grew taller."),
           ("The river flooded.", "The path was under water.", "The path was repaved.")]


def _copa_row(rng: random.Random, idx: int) -> dict:
    """A premise and two alternatives in COPA's columns: the cause (or effect) that fits, and one that does not."""
    question = rng.choice(["cause", "effect"])
    premise, right, wrong = rng.choice(CAUSES if question == "cause" else EFFECTS)
    who, place = rng.choice(PEOPLE), rng.choice(PLACES)
    premise = f"At {place}, {who} noticed it: {premise[0].lower()}{premise[1:]}"
    label = rng.randrange(2)
    choices = [right, wrong] if label == 0 else [wrong, right]
    return {"premise": premise, "choice1": choices[0], "choice2": choices[1], "question": question, "idx": idx,
            "label": label}


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
    rng = random.Random(SEED + 4)
    for split, count in (("train", 40), ("validation", 24), ("test", 264)):
        _write(HERE / "arc" / f"{split}.jsonl", [_arc_row(rng, f"demo-{split}-{i}") for i in range(count)])
    train, validation = _winogrande(random.Random(SEED + 3))
    _write(HERE / "winogrande" / "train.jsonl", train)
    _write(HERE / "winogrande" / "validation.jsonl", validation)
    rng = random.Random(SEED + 2)  # each set its own generator: the others keep their bytes
    train, validation = _hellaswag(rng)
    _write(HERE / "hellaswag" / "train.jsonl", train)
    _write(HERE / "hellaswag" / "validation.jsonl", validation)
    rng, questions = random.Random(SEED + 5), {}
    while len(questions) < 264:  # no question twice
        row = _truthfulqa_row(rng)
        questions.setdefault(row["question"], row)
    _write(HERE / "truthfulqa" / "validation.jsonl", list(questions.values()))
    for folder, make, seed in (("inverse_scaling_neqa", _neqa_row, SEED + 8), ("inverse_scaling_quote", _quote_row, SEED + 9)):
        rng, prompts = random.Random(seed), {}
        for _ in range(20000):  # no prompt twice
            row = make(rng)
            prompts.setdefault(row["prompt"], row)
            if len(prompts) == 264:
                break
        _write(HERE / folder / "train.jsonl", list(prompts.values()))
    rng, premises = random.Random(SEED + 10), {}
    while len(premises) < 296:  # no premise twice across both splits
        row = _copa_row(rng, 0)
        premises.setdefault(row["premise"], row)
    rows = list(premises.values())
    _write(HERE / "copa" / "validation.jsonl", [dict(row, idx=i) for i, row in enumerate(rows[:264])])
    _write(HERE / "copa" / "train.jsonl", [dict(row, idx=i) for i, row in enumerate(rows[264:])])
    rng = random.Random(SEED + 6)
    _write(HERE / "mrpc" / "validation.jsonl", [_mrpc_row(rng, i) for i in range(264)])
    _write(HERE / "mrpc" / "train.jsonl", [_mrpc_row(rng, i) for i in range(32)])
    rng = random.Random(SEED + 7)
    _write(HERE / "cola" / "validation.jsonl", [_cola_row(rng, i) for i in range(264)])
    _write(HERE / "cola" / "train.jsonl", [_cola_row(rng, i) for i in range(32)])
    rng = random.Random(SEED + 1)
    for subject, make in MMLU_SUBJECTS.items():
        seen = set()
        _write(HERE / "mmlu" / subject / "dev.jsonl", _unique(make, rng, 5, seen))
        _write(HERE / "mmlu" / subject / "test.jsonl", _unique(make, rng, 264, seen))


if __name__ == "__main__":
    main()
