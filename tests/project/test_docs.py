"""README, docs, CI and code agree: the quick start, every CLI option, the exit codes (defined once, in
util/errors.py), and every relative link in the README and docs/ (its file and its heading)."""

import inspect
import re

from support.paths import REPO

from sst2_audit.cli import adopt as cmd_adopt, audit as cmd_audit, corpus as cmd_corpus, prepare as cmd_prepare
from sst2_audit.cli import run as cmd_run
from sst2_audit.util.errors import EXIT_CODES

README = (REPO / "README.md").read_text()
CLI_DOC = (REPO / "docs" / "cli.md").read_text()
DOCS = [REPO / "README.md", REPO / "SOURCE_MAP.md", *sorted((REPO / "docs").glob("*.md"))]


def quick_start_commands() -> list:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", section, re.DOTALL)


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one():
    main, tests = quick_start_commands()
    assert main.endswith(".venv/bin/sst2-audit prepare --profile embedded && .venv/bin/sst2-audit run --profile embedded")
    install, run = tests.splitlines()
    assert install.endswith(".venv/bin/pip install -q --no-compile -e '.[lm-eval-0492,test]'")
    assert run == ".venv/bin/mypy && .venv/bin/python -m pytest -q"  # the type check (issue 60) first
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert install in ci and run in ci and ci.index(install) < ci.index(run)


def test_the_readme_is_a_front_door():
    assert len(README.splitlines()) < 200
    prose = "".join(README.split("```\n")[0::2])  # a copy-paste command line is as long as the command
    assert max(len(line) for line in prose.splitlines() if not line.startswith("|")) <= 400


def test_the_cli_reference_documents_every_option():
    for prog, body in (("prepare.py", cmd_prepare), ("run.py", cmd_run), ("audit.py", cmd_audit), ("adopt", cmd_adopt),
                         ("corpus", cmd_corpus)):
        for option in re.findall(r'add_argument\("(--[a-z-]+)"', inspect.getsource(body)):
            assert option in CLI_DOC, f"{prog} {option} is not in docs/cli.md"


def test_exit_codes_are_documented_from_their_one_definition():
    table = CLI_DOC.split("## Exit codes", 1)[1]
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", table, re.MULTILINE)
    assert [(int(code), text) for code, text in rows] == list(EXIT_CODES.items())
    listed = re.findall(r"^- (\d+): (.+)$", README.split("## Exit codes", 1)[1].split("\n## ", 1)[0], re.MULTILINE)
    assert [int(code) for code, _ in listed] == list(EXIT_CODES)
    assert all(EXIT_CODES[int(code)].startswith(text.split(" (")[0]) for code, text in listed)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_names_a_file_and_heading_that_exist():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", doc.read_text()) if doc.exists() else []:
            path, anchor = target
            if path.startswith(("http://", "https://")):
                continue
            linked = (doc.parent / path) if path else doc
            if not linked.exists():
                broken.append(f"{doc.name}: {path}")
            elif anchor and anchor not in {_slug(h) for h in re.findall(r"^#+ (.+)$", linked.read_text(), re.M)}:
                broken.append(f"{doc.name}: {path}#{anchor}")
    assert broken == []
