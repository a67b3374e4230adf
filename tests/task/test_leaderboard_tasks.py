"""Which releases' leaderboard task configs give the Open LLM Leaderboard v2's prompts (issue 62): the leaderboard's
tasks first ship as lm-eval 0.4.4's; scripts/compare_leaderboard_tasks.py compares each subtask's effective config
(includes merged, every !function as the code it reaches) in the 0.4.4 wheel with the pinned releases' wheels, all
from the package registry. The statuses here are the ones docs/formats.md states."""

import json
import subprocess
import sys

from support.paths import REPO, TEST_CACHE

MATH = ["algebra", "counting_and_prob", "geometry", "intermediate_algebra", "num_theory", "prealgebra", "precalculus"]


def test_the_pinned_releases_render_the_leaderboard_eras_prompts_but_for_math_hard():
    wheels = TEST_CACHE / "lm-eval-wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "compare_leaderboard_tasks.py"), "--wheels",
                           str(wheels), "--json"], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    assert found["base"] == "0.4.4" and found["subtasks"] == 39
    math = {f"leaderboard_math_{name}_hard" for name in MATH}
    for release in ("0.4.9.2", "0.4.13"):
        status = found["status"][release]
        assert len(status) == 39
        assert {name for name, words in status.items() if words != "same"} == math
        assert {status[name] for name in math} == {"prompts differ: dataset_path, dataset_kwargs, process_docs, "
                                                   "fewshot_config"}
        assert sum(name.startswith("leaderboard_bbh_") for name, words in status.items() if words == "same") == 24
        for name in ("leaderboard_mmlu_pro", "leaderboard_gpqa_main", "leaderboard_ifeval",
                     "leaderboard_musr_murder_mysteries"):  # musr's code was reformatted only: the same AST
            assert status[name] == "same"


def test_a_function_is_compared_as_the_code_it_reaches(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import compare_leaderboard_tasks as compare
    finally:
        sys.path.pop(0)
    base = {"t/task.yaml": "task: t\ndoc_to_text: !function utils.text\n",
            "t/utils.py": 'TEMPLATE = "{a}\\n" "Answer:"\n\n\ndef text(doc):\n    return TEMPLATE.format(a=doc[0+1])\n'}
    same = dict(base, **{"t/utils.py": 'TEMPLATE = "{a}\\nAnswer:"\n\n\ndef text(doc):\n'
                                       '    return TEMPLATE.format(a=doc[0 + 1])\n\n\ndef unused():\n    pass\n'})
    other = dict(base, **{"t/utils.py": 'TEMPLATE = "{a}\\nAnswer: "\n\n\ndef text(doc):\n'
                                        '    return TEMPLATE.format(a=doc[0+1])\n'})
    tasks = compare.tasks(base)
    assert compare.compare(tasks, compare.tasks(same)) == {"t": "same"}
    assert compare.compare(tasks, compare.tasks(other)) == {"t": "prompts differ: doc_to_text"}
    metric = dict(base, **{"t/task.yaml": base["t/task.yaml"] + "metric_list: [acc]\n"})
    assert compare.compare(tasks, compare.tasks(metric)) == {"t": "same prompts (other fields: metric_list)"}
