"""icectl.cli.complete: TABLE arguments complete from the configured catalog, through click's
completion protocol (``_ICECTL_COMPLETE=complete_bash`` with COMP_WORDS/COMP_CWORD), as the shell
scripts in completions/ call it; and the scripts themselves call back into icectl."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icectl.cli.app import app, enable_completion
from icectl.cli.docs.docgen import bash_completion, command_tree, fish_completion, zsh_completion

ROOT = Path(__file__).resolve().parents[3]
TABLES = {"sales.orders", "sales.returns", "web.clicks"}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file-system (hadoop) catalog with two namespaces, and its config file (catalogs local and prod)."""
    root = tmp_path_factory.mktemp("complete")
    wh = root / "wh"
    for name in sorted(TABLES):
        r = CliRunner().invoke(app, ["create", name, "--schema", "id long"],
                               env={"ICECTL_WAREHOUSE": str(wh), "ICECTL_CONFIG": ""})
        assert r.exit_code == 0, r.output
    (root / "icectl.toml").write_text(f'[catalog.local]\ntype = "hadoop"\nwarehouse = "{wh}"\n\n'
                                      f'[catalog.prod]\ntype = "hadoop"\nwarehouse = "{wh}"\n')
    (root / "broken.toml").write_text("[catalog.local\n")
    return root


def complete(words: list[str], env: dict[str, str | None] | None = None) -> tuple[list[str], str, int]:
    """The candidates icectl answers for the last of ``words`` (bash protocol), in process."""
    enable_completion()
    r = CliRunner().invoke(app, [], prog_name="icectl", env={
        "_ICECTL_COMPLETE": "complete_bash", "COMP_WORDS": " ".join(words), "COMP_CWORD": str(len(words) - 1),
        "ICECTL_CONFIG": "", "ICECTL_WAREHOUSE": None, **(env or {})})
    return [c for c in r.stdout.splitlines() if c], r.stderr, r.exit_code


def test_tables_of_the_config_given_on_the_command_line(catalog: Path) -> None:
    cfg = str(catalog / "icectl.toml")
    assert complete(["icectl", "--config", cfg, "inspect", "files", ""]) == (sorted([*TABLES, "prod."]), "", 0)
    assert complete(["icectl", "--config", cfg, "validate", "sa"])[0] == ["sales.orders", "sales.returns"]
    assert complete(["icectl", "--config", cfg, "expire-snapshots", "web."])[0] == ["web.clicks"]
    assert complete(["icectl", "--config", cfg, "branch", "create", "sales.r"])[0] == ["sales.returns"]
    # another catalog by its name: its tables with the catalog in front
    assert complete(["icectl", "--config", cfg, "drop", "prod.w"])[0] == ["prod.web.clicks"]
    # the second argument of branch create is a new branch name: nothing from the catalog
    assert complete(["icectl", "--config", cfg, "branch", "create", "sales.orders", ""])[0] == []


def test_the_default_config_when_none_is_given(catalog: Path) -> None:
    got, err, code = complete(["icectl", "inspect", "table", ""], env={"ICECTL_WAREHOUSE": str(catalog / "wh")})
    assert (got, err, code) == (sorted(TABLES), "", 0)
    got, _, _ = complete(["icectl", "inspect", "table", ""], env={"ICECTL_CONFIG": str(catalog / "icectl.toml")})
    assert got == sorted([*TABLES, "prod."])


@pytest.mark.parametrize("words", [
    ["icectl", "--config", "{broken}", "validate", ""],  # bad TOML
    ["icectl", "--config", "{missing}", "validate", ""],  # no such file
    ["icectl", "validate", ""],  # the default warehouse does not exist
    ["icectl", "--config", "{config}", "validate", "./"],  # a path: the shell completes files
    ["icectl", "--config", "{config}", "validate", "~/x"],
    ["icectl", "--config", "{config}", "validate", "wh/sa"],
    ["icectl", "--config", "{config}", "validate", "nosuch.ns."],
])
def test_no_candidates_never_an_error(catalog: Path, words: list[str]) -> None:
    words = [w.format(broken=catalog / "broken.toml", missing=catalog / "nope.toml", config=catalog / "icectl.toml")
             for w in words]
    assert complete(words, env={"ICECTL_WAREHOUSE": "/nonexistent/warehouse"} if "--config" not in words
                    else None) == ([], "", 0)


def _shim(tmp_path: Path) -> dict[str, str]:
    """An ``icectl`` on PATH that runs this checkout, as the installed one would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "icectl").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m icectl "$@"\n')
    (bin_dir / "icectl").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
            "ICECTL_CONFIG": ""}


def _shell(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(f"{name} is not installed (.ci/run installs it)")
    return exe


def test_the_shell_scripts_call_back_into_icectl(catalog: Path, tmp_path: Path) -> None:
    """Each generated script asks icectl for a TABLE argument and offers files when it answers none."""
    env = {**_shim(tmp_path), "ICECTL_WAREHOUSE": str(catalog / "wh")}
    root = command_tree(app)
    (tmp_path / "icectl.bash").write_text(bash_completion(root))
    (tmp_path / "_icectl").write_text(zsh_completion(root))
    (tmp_path / "icectl.fish").write_text(fish_completion(root))
    (tmp_path / "sample.parquet").write_bytes(b"")

    out = subprocess.run([_shell("bash"), "-c", f"source {tmp_path / 'icectl.bash'}; "
                          "COMP_WORDS=(icectl inspect files sales.); COMP_CWORD=3; _icectl; "
                          'echo "${COMPREPLY[@]}"; COMP_WORDS=(icectl validate ./sam); COMP_CWORD=2; _icectl; '
                          'echo "${COMPREPLY[@]}"'], capture_output=True, text=True, env=env, check=True,
                         cwd=tmp_path).stdout
    assert out.splitlines() == ["sales.orders sales.returns", "./sample.parquet"]

    out = subprocess.run([_shell("fish"), "-c", f"source {tmp_path / 'icectl.fish'}; "
                          "complete -C 'icectl inspect files w'; complete -C 'icectl validate ./sam'"],
                         capture_output=True, text=True, env=env, check=True,
                         cwd=tmp_path).stdout
    assert [ln.split("\t")[0] for ln in out.splitlines()] == ["web.clicks", "./sample.parquet"]

    # zsh completes only in an interactive shell: its completion builtins are stood in for, the
    # call back into icectl is the script's own.
    out = subprocess.run([_shell("zsh"), "-c", f"source {tmp_path / '_icectl'} 2>/dev/null; "
                          "compadd() { [[ $1 == -a ]] && print -l -- ${(P)2} }; _files() { print FILES }; "
                          "words=(icectl validate sales.o); CURRENT=3; _icectl_dynamic; "
                          "words=(icectl validate ./sam); CURRENT=3; _icectl_dynamic"],
                         capture_output=True, text=True, env=env, check=True,
                         cwd=tmp_path).stdout
    assert out.splitlines() == ["sales.orders", "FILES"]
