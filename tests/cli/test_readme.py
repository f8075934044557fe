"""The README's command lines are real: every ``icectl ...`` line of its shell blocks parses against
the app (the command exists, every option exists and its value converts), as the man pages'
examples do (unit/cli/test_examples.py). A renamed option or command fails here, not for a reader."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from unit.cli.test_examples import test_example_parses as parses

README = Path(__file__).resolve().parents[2] / "README.md"


def command_lines() -> list[str]:
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S):
        text = block.replace("\\\n", " ")  # continuation lines
        for line in text.splitlines():
            for part in re.split(r"&&|\|\||;|\|", line):  # `a && b`, `... || status=$?`, pipes
                words = shlex.split(part, comments=True)
                if words and words[0] == "icectl":
                    lines.append(shlex.join(w for w in words if not re.match(r"^\d?>>?", w)))
    return lines


LINES = command_lines()


def test_the_readme_has_command_lines() -> None:
    assert len(LINES) > 40  # the tour, maintenance, health, views ...


@pytest.mark.parametrize("line", LINES)
def test_readme_line_parses(line: str) -> None:
    parses("", "", line)


def test_ci_runs_the_readme_set_up_commands_verbatim() -> None:
    """CI proves the README's two set-up commands (issue 26): each is a line of .ci/run, as written."""
    section = README.read_text().split("## Set up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    commands = [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S)]
    assert len(commands) == 2 and commands[0].startswith("pip install .") and "pytest" in commands[1], commands
    ci = [line.strip() for line in (README.parent / ".ci" / "run").read_text().splitlines()]
    for command in commands:
        assert command in ci, f".ci/run does not run the README's {command!r}"
