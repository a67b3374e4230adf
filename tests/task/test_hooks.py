"""Task code hooks as pinned shared code (sst2_audit/task/hooks.py): read statically before they run, loaded
from the bytes the lock pins, run by both paths, named on every output; a changed byte is refused."""

import json
import random

import pytest

from support.builders import prepare_run_audit
from support.paths import DEMOS, REPO
from support.processes import run_script
from support.shadows import refused_with_a_changed_hook, shadow_lm_eval
from sst2_audit.task import hook_check, hooks
from sst2_audit.util.errors import CheckFailed

GOOD = "import re\nimport datasets\n\n\ndef process_docs(dataset):\n    return dataset.map(lambda d: d)\n"


def _reason(tmp_path, text: str, function: str = "process_docs"):
    path = tmp_path / "utils.py"
    path.write_text(text)
    return hooks.code_reason(path, function)


def test_a_hook_file_is_read_statically_and_refused_with_the_reason(tmp_path):
    assert _reason(tmp_path, GOOD) is None
    assert _reason(tmp_path, "from lm_eval.api.registry import x\n" + GOOD) == (
        "utils.py imports lm-eval internals (lm_eval.api.registry)")
    # random: only `import random` at the top, whose module-level draws hooks.seeded binds to simple_evaluate's seed
    assert _reason(tmp_path, "import random\n" + GOOD + "\nX = random.shuffle\n") is None
    for other in ("from random import shuffle\n", "import random as r\n", "import random, re\n"):
        assert _reason(tmp_path, other + GOOD).startswith("utils.py imports random other than by a plain top-level "
                                                          "`import random`"), other
    assert _reason(tmp_path, GOOD + "\ndef more():\n    import random\n    return random.random()\n").startswith(
        "utils.py imports random other than by a plain top-level `import random`")
    assert _reason(tmp_path, "import random\n" + GOOD + "\nX = random.seed\n") == (
        "utils.py reaches random.seed (not on the hook check's list of module attributes)")
    assert _reason(tmp_path, "import random\n" + GOOD + "\nX = random.Random\n") == (
        "utils.py reaches random.Random (not on the hook check's list of module attributes)")
    assert _reason(tmp_path, GOOD + "\ndef more():\n    return open('x')\n") == "utils.py uses open (it opens files)"
    assert _reason(tmp_path, GOOD + "\ndef more(f):\n    return f.read()\n") == (
        "utils.py reaches the attribute read of a value (not among the attributes lm-eval's own hook files take)")
    assert _reason(tmp_path, GOOD + "\ndef more():\n    return sorted([1], key=exec)\n") == (
        "utils.py uses exec (it runs text as code)")
    assert _reason(tmp_path, "import datasets\n" + GOOD + "\ndatasets.load_dataset('x')\n") == (
        "utils.py calls load_dataset (it loads a dataset (the network or the hub))")
    assert _reason(tmp_path, "from datasets import load_dataset\n" + GOOD) == (
        "utils.py imports load_dataset from datasets (not on the hook check's list of module attributes)")
    assert _reason(tmp_path, "import numpy as np\n" + GOOD + "\nX = np.random.rand()\n") == (
        "utils.py reaches numpy.random (not on the hook check's list of module attributes)")
    assert _reason(tmp_path, GOOD, "process_stem") == "utils.py defines no top-level function process_stem"
    assert _reason(tmp_path, "from .other import f\n" + GOOD) == "utils.py imports a sibling module (relative import)"
    # global_mmlu binds its functions through globals().update: found at load time, not statically
    assert _reason(tmp_path, GOOD + "\nglobals().update({'process_stem': process_docs})\n", "process_stem") is None
    assert _reason(tmp_path, "def process_docs(:\n") .startswith("its file utils.py does not parse")


def test_generated_hook_files_are_refused_exactly_when_they_import_outside_the_allowed_set(tmp_path):
    """Generated cases: random mixes of allowed and refused imports, in both import forms."""
    refused = ["os", "sys", "time", "subprocess", "requests", "urllib.request", "socket", "pickle",
               "lm_eval.utils", "huggingface_hub", "sklearn.metrics", "evaluate", "transformers"]
    allowed = sorted(hook_check.ALLOWED_IMPORTS - {"__future__"})
    rng = random.Random(5)
    for case in range(200):
        chosen = rng.sample(allowed, rng.randint(0, 3)) + rng.sample(refused, rng.randint(0, 2) if case % 3 else 0)
        rng.shuffle(chosen)
        # a from-import names an attribute on the hook check's list (any other is refused: the bypass test below)
        lines = [f"from {name} import {sorted(hook_check.MODULE_ATTRIBUTES[name])[0]}"
                 if name in hook_check.MODULE_ATTRIBUTES and name != "random" and rng.random() < 0.5 else
                 f"import {name}" if rng.random() < 0.5 or name not in refused else f"from {name} import something"
                 for name in chosen]
        reason = _reason(tmp_path, "\n".join(lines) + "\n" + GOOD)
        first_refused = next((name for name in chosen if name.split(".")[0] not in hook_check.ALLOWED_IMPORTS), None)
        if first_refused is None:
            assert reason is None, (lines, reason)
        elif first_refused.startswith("lm_eval"):
            assert reason == f"utils.py imports lm-eval internals ({first_refused})", (lines, reason)
        else:
            assert reason.startswith(f"utils.py imports {first_refused} (hooks may import only"), (lines, reason)


# Issue 28: ways from allowed modules to the file system, the shell or the builtins that an import-only
# check let through (11 of 11 in a red-team round). The pin is the barrier; this check is the second line.
BYPASS_SHAPES = {
    "datasets' file utilities": ("import datasets", "datasets.utils.file_utils.os.system('{marker}')"),
    "numpy's io module": ("import numpy as np", "np.lib.npyio.os.system('{marker}')"),
    "a from-import of a module's os": ("from datasets.utils.file_utils import os", "os.system('{marker}')"),
    "a from-import of a submodule": ("from numpy.lib import npyio", "npyio.os.system('{marker}')"),
    "getattr with a computed name": ("import re", "getattr(re, 'sy' + 's').modules['os'].system('{marker}')"),
    "getattr on the builtins": ("import re", "getattr(__builtins__, 'op' + 'en')('{marker}', 'w')"),
    "a module's __builtins__": ("import re", "re.__builtins__['open']('{marker}', 'w')"),
    "__subclasses__ through __mro__": ("import re", "().__class__.__mro__[1].__subclasses__()"),
    "globals()['__builtins__']": ("import re", "globals()['__builtins__']['open']('{marker}', 'w')"),
    "vars of a module": ("import re", "vars(re)['sys'].modules['os'].system('{marker}')"),
    "an alias of a module": ("import numpy as np", "m = np\n    m.lib.npyio.os.system('{marker}')"),
    "a module handed to a function": ("import numpy as np", "print(np)"),
    "a module attribute off the list": ("import json", "json.codecs.open('{marker}', 'w')"),
    # issue 48: the red team's shapes that the list of names and module attributes let through (26 of 33)
    "a generator's frame to the builtins": (
        "import re", "(x for x in ()).gi_frame.f_builtins['op' + 'en']('{marker}', 'w')"),
    "a generator's frame to the globals": ("import re", "(x for x in ()).gi_frame.f_globals['re']"),
    "a frame's caller": ("import re", "(x for x in ()).gi_frame.f_back.f_builtins"),
    "a generator bound to a name": ("import re", "g = (x for x in ())\n    g.gi_frame.f_builtins"),
    "a generator's code": ("import re", "(x for x in ()).gi_code.co_consts"),
    "a generator function": ("import re", "def gen():\n        yield 1\n    gen().gi_frame"),
    "a coroutine's frame": ("import re", "async def co():\n        pass\n    co().cr_frame.f_builtins"),
    "a format string's attribute field": ("import re", "'{{0.gi_frame.f_builtins}}'.format((x for x in ()))"),
    "a format string bound to a name": ("import re", "t = '{{0.gi_frame}}'\n    t.format((x for x in ()))"),
    "a format string built at run time": ("import re", "('{{0.gi_' + 'frame}}').format((x for x in ()))"),
    "format_map with an attribute field": ("import re", "'{{g.gi_frame}}'.format_map({{'g': (x for x in ())}})"),
    "a format string's item field": ("import re", "'{{0[__builtins__]}}'.format(d)"),
    "a nested format spec": ("import re", "'{{0:{{1.gi_frame}}}}'.format(1, (x for x in ()))"),
    "str.format called on the class": ("import re", "str.format('{{0.gi_frame}}', (x for x in ()))"),
    "type with three arguments": ("import re", "C = type('C', (), {{'x': 1}})"),
    "a metaclass": ("import re", "class M(type):\n        pass\n    class C(metaclass=M):\n        pass"),
    "a class": ("import re", "class C:\n        pass"),
    "json's object_hook to exec": ("import json", "json.loads('[]', object_hook=exec)"),
    "a builtin handed to sorted": ("import re", "sorted(['1'], key=eval)"),
    "a builtin handed to map": ("import re", "list(map(exec, ['x = 1']))"),
    "a builtin handed to Dataset.map": ("import datasets", "dataset.map(open)"),
    "a builtin as a default argument": ("import re", "(lambda f=open: f)('{marker}')"),
    "Dataset.to_json": ("import datasets", "datasets.Dataset.from_dict({{'a': [1]}}).to_json('{marker}')"),
    "numpy's tofile": ("import numpy as np", "np.array([1]).tofile('{marker}')"),
    "numpy's dump (a pickle)": ("import numpy as np", "np.array([1]).dump('{marker}')"),
    "from_csv on a dataset": ("import datasets", "dataset.from_csv('/etc/passwd')"),
    "from_csv on the imported class": ("from datasets import Dataset", "Dataset.from_csv('/etc/passwd')"),
    "to_csv through pandas": ("import datasets", "dataset.to_pandas().to_csv('{marker}')"),
    "save_to_disk": ("import datasets", "dataset.save_to_disk('{marker}')"),
    "a subscript by a dunder string": ("import re", "d['__builtins__']['open']('{marker}', 'w')"),
    "object's subclasses": ("import re", "object.mro()"),
    "help": ("import re", "help('modules')"),
    "a walrus to a builtin": ("import re", "(f := print)"),
    "a with statement": ("import re", "with d as f:\n        pass"),
}


@pytest.mark.parametrize("shape", sorted(BYPASS_SHAPES))
def test_every_bypass_shape_is_refused_in_every_position(tmp_path, shape):
    """Generated: each shape inside the hook function, at module level and inside a nested function,
    under random names; each file is only read (never imported here), and no marker file appears."""
    imports, body = BYPASS_SHAPES[shape]
    marker = tmp_path / "MARKER"
    rng = random.Random(shape)
    for case in range(12):
        statement = body.format(marker=marker)
        name = f"process_{rng.randrange(10 ** 6)}"
        placed = [f"def {name}(dataset):\n    {statement}\n    return dataset\n",
                  f"def {name}(dataset):\n    return dataset\n\n\ndef later():\n    {statement}\n",
                  f"def {name}(dataset):\n    def inner():\n        {statement.replace(chr(10) + '    ', chr(10) + '        ')}\n"
                  "    return dataset\n"][case % 3]
        reason = _reason(tmp_path, f"{imports}\n\n\n{placed}", name)
        assert reason is not None and reason.startswith("utils.py "), (shape, placed, reason)
    assert not marker.exists()


def test_the_hook_check_keeps_every_supported_task_of_the_installed_lm_eval():
    """The second line refuses nothing a supported config's hook file does (measured: 5,979 configs, 300
    hook files): a change to the lists that drops one fails here by name."""
    done = run_script("run.py", "--list-tasks", "*", "--supported")
    summary = done.stdout.splitlines()[0]
    assert summary.startswith("7225 installed multiple_choice tasks match '*', 5979 within the audit's protocol"), summary


def test_list_tasks_supports_hooks_that_run_as_pinned_code_and_names_the_others():
    done = run_script("run.py", "--list-tasks", "hellaswag")
    assert done.stdout.splitlines()[1].split()[:2] == ["hellaswag", "supported"], done.stdout
    done = run_script("run.py", "--list-tasks", "tinyTruthfulQA")  # its process_results is not truthfulqa's mc2
    assert done.stdout.splitlines()[1].split()[1:] == (
        "refused has its own process_results (lm_eval/tasks/tinyBenchmarks/utils_truthfulqa.py::process_results_mc2), "
        "a metric computed by task code that is not re-derived (re-derived: truthfulqa's process_results_mc2)"
    ).split(), done.stdout
    done = run_script("run.py", "--list-tasks", "*")
    summary = done.stdout.splitlines()[0]
    supported = sum(line.split()[1] == "supported" for line in done.stdout.splitlines()[1:] if len(line.split()) > 1)
    assert summary.startswith("7225 installed multiple_choice tasks match '*', ") and supported >= 5000, summary


def test_a_loaded_hook_is_the_pinned_bytes_or_nothing(tmp_path):
    path = tmp_path / "utils.py"
    path.write_text(GOOD)
    import hashlib

    pinned = hashlib.sha256(GOOD.encode()).hexdigest()
    hook = hooks.Hook("process_docs", "lm_eval/tasks/x/utils.py", "process_docs", str(path), pinned)
    assert callable(hooks.load(hook)) and hooks.source(hook).startswith("def process_docs(dataset):")
    path.write_text(GOOD.replace("d: d", "d: d "))  # one byte more
    changed = hooks.Hook("process_docs", "lm_eval/tasks/x/utils.py", "process_docs", str(path), pinned)
    hooks._LOADED.clear()
    with pytest.raises(CheckFailed, match=f"but the lock pins lm_eval/tasks/x/utils.py as {pinned}; the hook code"):
        hooks.load(changed)
    assert hooks.stable("functools.partial(<function f at 0x7f3a2b>, subject='x')") == (
        "functools.partial(<function f at 0x...>, subject='x')")
    # global_mmlu's hooks are partials bound through globals().update: logged as their str(), address made stable
    text = "from functools import partial\n" + GOOD + "\nglobals().update({'process_x': partial(process_docs)})\n"
    path.write_text(text)
    partial_hook = hooks.Hook("process_docs", "lm_eval/tasks/x/utils.py", "process_x", str(path),
                              hashlib.sha256(text.encode()).hexdigest())
    assert hooks.source(partial_hook) == "functools.partial(<function process_docs at 0x...>)"


def test_hellaswag_s_process_docs_hook_runs_as_pinned_shared_code_and_a_changed_byte_is_refused(tiny_demos, tmp_path):
    """HellaSwag-shaped demo data at 10 shots: lm-eval and the independent path both run the pinned
    process_docs; both paths bit for bit, the default audit rescoring every row says PASS. The hook is the point,
    not the model: a tiny one (the real model runs COPA's and Winogrande's hooks)."""
    record = prepare_run_audit(tiny_demos, "embedded-hellaswag-10shot", tmp_path, bundle=True)
    assert record["max_abs_diff"] == 0.0 and [len(q["shots"]) for q in record["questions"]] == [10, 10]
    assert record["evaluator"]["shared_code"] == [{
        "step": "process_docs", "file": "lm_eval/tasks/hellaswag/utils.py", "function": "process_docs",
        "sha256": json.loads(DEMOS.read_text())["evaluator"]["files"]["lm_eval/tasks/hellaswag/utils.py"]}]
    assert record["task_config"]["effective"]["process_docs"].startswith("def process_docs(dataset: datasets.Dataset)")
    private = json.loads((tmp_path / "private" / "private.json").read_text())
    assert all("query" in q["doc"] and "gold" in q["doc"] for q in private["questions"])  # the processed docs
    page = (tmp_path / "out" / "report.html").read_text()
    assert "shared pinned code, not re-derived: process_docs ran lm_eval/tasks/hellaswag/utils.py::process_docs" in page
    # the verdict line itself names what was shared, not re-derived (first and last line alike)
    done = run_script("audit.py", "--lock", tiny_demos, "--out", tmp_path / "out", "--cache", tmp_path / "cache",
                      "--structural")
    verdict = ("VERDICT: SCORES NOT VERIFIED: none of the 2 scored rows was rescored (--structural); shared pinned code, "
               "not re-derived: process_docs (lm_eval/tasks/hellaswag/utils.py::process_docs); exit 4")
    assert done.returncode == 4 and done.stdout.splitlines()[0] == verdict == done.stdout.splitlines()[-1], done.stdout
    shadow = shadow_lm_eval(tmp_path, "hellaswag", "utils.py", b'text.replace("  ", " ")', b'text.replace("  ", "_")')
    refused_with_a_changed_hook(tmp_path, "embedded-hellaswag-10shot", shadow, "lm_eval/tasks/hellaswag/utils.py",
                                lock=tiny_demos)


def test_winogrande_a_multiple_input_task_scores_every_context_with_the_shared_continuation(tmp_path):
    """doc_to_text gives the right option's index, the choices are the sentence up to the blank with each
    option, the continuation is the rest (all three hooks of preprocess_winogrande.py, shared pinned code)."""
    record = prepare_run_audit(DEMOS, "embedded-winogrande-5shot", tmp_path, bundle=True)
    assert record["max_abs_diff"] == 0.0 and [len(q["shots"]) for q in record["questions"]] == [5, 5]
    assert [code["step"] for code in record["evaluator"]["shared_code"]] == ["doc_to_text", "doc_to_target",
                                                                           "doc_to_choice"]
    private = json.loads((tmp_path / "private" / "private.json").read_text())
    rows = [json.loads(line) for line in (REPO / "data" / "demo" / "winogrande" / "validation.jsonl").read_text().splitlines()]
    for question, recorded in zip(private["questions"], record["questions"]):
        row = rows[question["idx"]]
        blank = row["sentence"].index("_")
        # lm-eval logs the first request's context: the five shots, then the sentence with option 1
        assert question["context"].endswith("\n\n" + row["sentence"][:blank] + row["option1"])
        assert question["context"].count("\n\n") == 5
        assert recorded["label"] == int(row["answer"]) - 1 and len(recorded["scores"]["official"]) == 2
        assert recorded["candidate_token_counts"][0] == recorded["candidate_token_counts"][1]  # one continuation
    shadow = shadow_lm_eval(tmp_path, "winogrande", "preprocess_winogrande.py", b'{"1": 0, "2": 1}', b'{"1": 0, "2": 0}')
    refused_with_a_changed_hook(tmp_path, "embedded-winogrande-5shot", shadow,
                                 "lm_eval/tasks/winogrande/preprocess_winogrande.py")


def test_a_pass_verdict_names_the_shared_pinned_code():
    from sst2_audit.audit.verdict import Outcome

    shared = ["process_docs (lm_eval/tasks/hellaswag/utils.py::process_docs)"]
    assert Outcome([], shared=shared).verdict() == (
        "VERDICT: PASS: every level passed and every scored row was rescored bit for bit; shared pinned code, not "
        "re-derived: process_docs (lm_eval/tasks/hellaswag/utils.py::process_docs); exit 0")
    assert Outcome([]).verdict() == "VERDICT: PASS: every level passed and every scored row was rescored bit for bit; exit 0"


def test_copa_s_three_hooks_run_as_pinned_shared_code_end_to_end(tmp_path):
    """COPA-shaped demo data: doc_to_text, doc_to_target (the right alternative's text) and doc_to_choice of
    super_glue/copa/utils.py, shared by both paths; the gold is the target's index among the choices."""
    record = prepare_run_audit(DEMOS, "embedded-copa", tmp_path)
    assert [code["step"] for code in record["evaluator"]["shared_code"]] == ["doc_to_text", "doc_to_target",
                                                                           "doc_to_choice"]
    rows = [json.loads(line) for line in (REPO / "data" / "demo" / "copa" / "validation.jsonl").read_text().splitlines()]
    private = json.loads((tmp_path / "private" / "private.json").read_text())
    for question, recorded in zip(private["questions"], record["questions"]):
        row = rows[question["idx"]]
        connector = {"cause": "because", "effect": "therefore"}[row["question"]]
        assert question["context"] == row["premise"][:-1] + f" {connector}"
        assert recorded["label"] == row["label"] and record["max_abs_diff"] == 0.0



def test_the_list_pattern_may_follow_supported(capsys):
    """`--list-tasks --supported 'sst*'` as people type it (issue 31): the same listing as the pattern first."""
    from sst2_audit.cli import run_main

    assert run_main(["--list-tasks", "sst*", "--supported"]) == 0
    first = capsys.readouterr().out
    assert first.startswith("1 installed multiple_choice task matches 'sst*', 1 within the audit's protocol"), first
    assert first.endswith("a supported task is pinned with sst2-audit prepare --pin\n"
                          "sst2  pinned     lm_eval/tasks/glue/sst2/default.yaml\n"), first
    assert run_main(["--list-tasks", "--supported", "sst*"]) == 0
    assert capsys.readouterr().out == first
    assert run_main(["--list-tasks", "--supported", "sst*", "rte"]) == 2
    assert "error: sst2-audit run: unrecognized arguments: sst* rte" in capsys.readouterr().err


def test_a_drawing_hook_draws_from_the_seed_it_is_given_and_never_from_the_process(tmp_path):
    """A hook file that imports random (GPQA's shape, and one that binds random.shuffle at import): each call draws
    from a fresh random.Random(seed), whatever the process drew before, and the process's own state is untouched;
    outside a call it cannot draw."""
    import datasets
    import hashlib

    text = ("import random\n\nSHUFFLE = random.shuffle\n\n\ndef process_docs(dataset):\n"
            "    def one(doc):\n        order = [0, 1, 2, 3]\n        random.shuffle(order)\n"
            "        again = [0, 1, 2, 3]\n        SHUFFLE(again)\n        return {'order': order, 'again': again}\n"
            "    return dataset.map(one, load_from_cache_file=False)\n\n\ndef later():\n    return random.choice([1, 2])\n")
    assert _reason(tmp_path, text) is None
    file = tmp_path / "utils.py"
    hook = hooks.Hook("process_docs", "tasks/x/utils.py", "process_docs", str(file),
                      hashlib.sha256(file.read_bytes()).hexdigest())
    rows = datasets.Dataset.from_list([{"n": n} for n in range(6)])
    expected, draws = [], random.Random(7)
    for _ in range(6):
        order, again = [0, 1, 2, 3], [0, 1, 2, 3]
        draws.shuffle(order)
        draws.shuffle(again)
        expected.append((order, again))
    random.seed(123)
    state = random.getstate()
    for _ in range(2):  # a second call draws the same: a fresh state per call, as datasets' cache gives lm-eval
        got = hook(rows, random_seed=7)
        assert [(doc["order"], doc["again"]) for doc in got] == expected
    assert random.getstate() == state
    with pytest.raises(RuntimeError, match="outside a seeded call"):
        hooks.load(hook, 7).__wrapped__.__globals__["later"]()
    with pytest.raises(RuntimeError, match="draws from random and was loaded without a seed"):
        hooks.load(hook)
