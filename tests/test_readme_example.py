"""README, "Audit your own model and data": its four commands, verbatim, in a folder of a user's own files."""

import csv
import json
import shlex
import shutil
import subprocess
import sys

from conftest import REPO, tiny_llama

README = (REPO / "README.md").read_text()


def _example_commands() -> list:
    section = README.split("## Audit your own model and data", 1)[1].split("\n## ", 1)[0]
    block = section.split("```\n", 2)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_example_runs_verbatim(embedded_cache, tmp_path):
    model = tmp_path / "my-model"
    tiny_llama(11).save_pretrained(model, safe_serialization=True, max_shard_size="4MB")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(embedded_cache / "model" / name, model / name)
    data = tmp_path / "my-data"
    data.mkdir()
    rows = [{"sentence1": f"Example premise {n}: a lamp stood by door {n}.", "sentence2": f"A lamp stood by door {n}.",
             "label": n % 2, "idx": n} for n in range(200)]
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:8]))
    with (data / "validation.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    commands = _example_commands()
    assert [c.split()[1] for c in commands] == ["prepare.py", "prepare.py", "run.py", "audit.py"]
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "python"
        done = subprocess.run([sys.executable, str(REPO / words[1]), *words[2:]], cwd=tmp_path, capture_output=True,
                              text=True)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    assert done.stdout.startswith("VERDICT: PASS: every level passed and every scored row was rescored bit for bit")
    assert (tmp_path / "results" / "mine-full.tar.gz").is_file()
