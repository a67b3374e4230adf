"""README, CI and code agree."""

import re

from conftest import REPO

README = (REPO / "README.md").read_text()


def quick_start_commands() -> list:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", section)


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one():
    main, tests = quick_start_commands()
    assert "prepare.py --profile embedded" in main and "run.py --profile embedded" in main
    assert tests.endswith("-m pytest -q")
    assert tests in (REPO / ".ci" / "run").read_text().splitlines()


def test_readme_documents_every_cli_option():
    from sst2_audit.cli import audit as cmd_audit, prepare as cmd_prepare, run as cmd_run

    for prog, body in (("prepare.py", cmd_prepare), ("run.py", cmd_run), ("audit.py", cmd_audit)):
        source = __import__("inspect").getsource(body)
        for option in re.findall(r'add_argument\("(--[a-z-]+)"', source):
            assert option in README, f"{prog} {option} is not in the README"


def test_exit_codes_are_documented():
    assert "| 0 | all checks passed |" in README
    assert "| 2 | bad usage or unreadable input |" in README
    from sst2_audit.audit.runner import EXIT_LIMITED

    assert f"| {EXIT_LIMITED} | audit.py only: no problem found, but not everything verified" in README
