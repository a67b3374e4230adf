"""Demo rows of our own, generated here (never third-party text), in the shapes of public tasks."""

import random


def word_problems(count: int, seed: int, split: str) -> list:
    """GSM8K-shaped rows (`question`, `answer` ending in '#### N') of our own: made-up sums, a demo."""
    rng, rows = random.Random(seed), []
    for n in range(count):
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        who, what = rng.choice(["Ada", "Bram", "Cleo", "Dev"]), rng.choice(["marbles", "stamps", "shells"])
        rows.append({"question": f"(demo {split} {n}) {who} has {a} {what} and finds {b} more. How many now?",
                     "answer": f"{who} had {a}. {a} + {b} = {a + b}.\n#### {a + b}"})
    return rows


def boolean_expressions(count: int, seed: int) -> list:
    """BBH-shaped rows (`input`, `target`) of our own: random Boolean expressions, evaluated here. A demo."""
    rng = random.Random(seed)

    def expression(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(["True", "False"])
        kind = rng.choice(["not", "and", "or", "group"])
        if kind == "not":
            return f"not {expression(depth - 1)}"
        if kind == "group":
            return f"( {expression(depth - 1)} )"
        return f"{expression(depth - 1)} {kind} {expression(depth - 1)}"

    rows, seen = [], set()
    while len(rows) < count:
        text = expression(3)
        if text in seen:
            continue
        seen.add(text)
        rows.append({"input": f"{text} is", "target": str(eval(text))})  # noqa: S307 - our own expression
    return rows


def navigate_rows(count: int, seed: int) -> list:
    """BBH navigate-shaped rows (`input`, `target` Yes or No) of our own: random steps along one line, facing
    forward, and whether they end where they began. A demo."""
    rng = random.Random(seed)
    rows, seen = [], set()
    while len(rows) < count:
        steps = [rng.choice((-1, 1)) * rng.randint(1, 9) for _ in range(rng.randint(2, 5))]
        if rng.random() < 0.5:
            steps.append(-sum(steps) or rng.randint(1, 9))
        words = " ".join(f"Take {abs(n)} step{'s' if abs(n) > 1 else ''} {'right' if n > 0 else 'left'}."
                         for n in steps)
        if words in seen:
            continue
        seen.add(words)
        rows.append({"input": "If you follow these instructions, do you return to the starting point? Always face "
                              f"forward. {words}\nOptions:\n- Yes\n- No", "target": "Yes" if sum(steps) == 0 else "No"})
    return rows
