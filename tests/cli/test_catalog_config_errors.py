"""A catalog configured wrongly is one line naming the config file, exit 4, before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode

BAD = {
    "rest-uri-not-a-url": ('type = "rest"\nuri = "notaurl"\n', "not an http(s) URL"),
    "rest-uri-unparseable": ('type = "rest"\nuri = "http://[::1"\n', "not an http(s) URL"),
    "rest-timeout-not-a-number": ('type = "rest"\nuri = "http://127.0.0.1:1"\ntimeout = "abc"\n',
                                  "not a number of seconds"),
    "glue-endpoint-not-a-url": ('type = "glue"\nregion = "us-east-1"\nendpoint = "not a url"\n',
                                "Invalid endpoint"),
    "sql-port-not-a-number": ('type = "sql"\nuri = "postgresql://u:p@127.0.0.1:abc/db"\n', "bad port"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_catalog_config_is_one_line_and_exit_4(case: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    body, mention = BAD[case]
    config = tmp_path / "icectl.toml"
    config.write_text(f"[catalog.c]\n{body}")
    monkeypatch.setenv("ICECTL_CONFIG", str(config))
    for args in (["list", "--catalog", "c"], ["inspect", "table", "c.db.t"]):
        r = CliRunner().invoke(app, args)
        lines = r.stderr.strip().splitlines()
        assert r.exit_code == ExitCode.CORRUPT and len(lines) == 1, (args, r.exit_code, r.stderr)
        assert mention in lines[0] and str(config) in lines[0] and "Traceback" not in r.stderr
