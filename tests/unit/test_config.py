"""Where icectl finds its catalogs: the config file's lookup order, its schema, environment overrides."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib

from icectl.config import CATALOG_TYPES, DEFAULT_WAREHOUSE, load_config, parse_config
from icectl.errors import CorruptInputError, ExitCode, NotFoundError


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ICECTL_CONFIG", "ICECTL_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def test_no_file_gives_one_local_hadoop_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config()
    assert cfg.source is None and cfg.default_catalog == "local" and list(cfg.catalogs) == ["local"]
    local = cfg.catalog()
    assert (local.type, local.warehouse, local.uri) == ("hadoop", DEFAULT_WAREHOUSE, None)
    monkeypatch.setenv("ICECTL_WAREHOUSE", "/data/wh")
    assert load_config().catalog("local").warehouse == "/data/wh"


def test_catalogs_default_and_s3_from_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text('default-catalog = "prod"\n'
                 '[catalog.prod]\ntype = "sql"\nuri = "/db/cat.db"\nwarehouse = "s3://b/wh"\nowner = "me"\n'
                 '[catalog.scratch]\nwarehouse = "/tmp/wh"\n'
                 '[s3]\nendpoint = "http://127.0.0.1:9000"\nregion = "eu"\naccess-key-id = "AK"\n'
                 'secret-access-key = "SK"\nsession-token = "T"\n')
    monkeypatch.setenv("ICECTL_WAREHOUSE", "/over")  # overrides the default catalog's warehouse only
    cfg = load_config(f)
    assert cfg.source == str(f) and cfg.default_catalog == "prod"
    prod = cfg.catalog()
    assert (prod.name, prod.type, prod.uri, prod.warehouse, prod.properties) == (
        "prod", "sql", "/db/cat.db", "/over", {"owner": "me"})
    assert (cfg.catalog("scratch").type, cfg.catalog("scratch").warehouse) == ("hadoop", "/tmp/wh")
    s3 = cfg.s3
    assert (s3.endpoint, s3.region, s3.access_key_id, s3.secret_access_key, s3.session_token) == (
        "http://127.0.0.1:9000", "eu", "AK", "SK", "T")
    with pytest.raises(NotFoundError, match=r"no catalog named 'x' is configured \(known: prod, scratch\)") as e:
        cfg.catalog("x")
    assert e.value.exit_code == ExitCode.NOT_FOUND


def test_lookup_order_env_then_working_folder_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home" / ".config" / "icectl"
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[catalog.fromhome]\n')
    assert "fromhome" in load_config().catalogs
    (tmp_path / "icectl.toml").write_text('[catalog.fromcwd]\n')
    assert "fromcwd" in load_config().catalogs and "fromhome" not in load_config().catalogs
    named = tmp_path / "named.toml"
    named.write_text('[catalog.fromenv]\n')
    monkeypatch.setenv("ICECTL_CONFIG", str(named))
    assert set(load_config().catalogs) == {"fromenv", "local"}  # plus the default catalog
    monkeypatch.setenv("ICECTL_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(NotFoundError, match="config file not found") as e:
        load_config()  # a named file that is missing is an error, never a silent fallback
    assert e.value.exit_code == ExitCode.NOT_FOUND


@pytest.mark.parametrize(("raw", "message"), [
    ({"catalog": {"x": {"type": "hive"}}}, "unknown type 'hive'"),
    ({"catalog": {"x": {"type": "sql"}}}, "needs uri"),
    ({"catalog": {"x": "oops"}}, r"\[catalog.x\] must be a table"),
    ({"default-catalog": "y", "catalog": {"x": {}}}, "default-catalog 'y' is not configured"),
], ids=["unknown-type", "sql-without-uri", "not-a-table", "default-missing"])
def test_bad_config_is_corrupt_input(raw: dict, message: str) -> None:
    with pytest.raises(CorruptInputError, match=message) as e:
        parse_config(raw, source="c.toml")
    assert e.value.exit_code == ExitCode.CORRUPT and e.value.path == "c.toml"


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[catalog.x\n")
    with pytest.raises(CorruptInputError, match="invalid config file") as e:
        load_config(bad)
    assert e.value.path == str(bad) and e.value.exit_code == ExitCode.CORRUPT


def test_the_readme_configuration_example_is_a_valid_config_naming_every_catalog_type() -> None:
    """The README's example is what users copy: it must parse, and show each supported catalog."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", readme, flags=re.S)
    assert blocks, "no toml example in the README"
    config = parse_config(tomllib.loads(blocks[0]), source="README.md")
    assert {c.type for c in config.catalogs.values()} == set(CATALOG_TYPES)
    assert config.catalog("pg").uri.startswith("postgresql://")


def test_catalog_keys_pass_through_and_sub_tables_flatten_to_dotted_keys() -> None:
    raw = tomllib.loads('[catalog.r]\ntype = "rest"\nuri = "http://x"\ncredential = "a:b"\n'
                        'header.X-Tenant = "acme"\n"jdbc.user" = "u"\n[catalog.r.s3]\nendpoint = "http://s3"\n')
    cc = parse_config(raw, source="cfg.toml").catalog("r")
    assert cc.properties == {"credential": "a:b", "header.X-Tenant": "acme", "jdbc.user": "u",
                             "s3.endpoint": "http://s3"}
    assert cc.warehouse == "" and cc.source == "cfg.toml"  # no local default for a server's catalog
