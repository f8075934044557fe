"""The rule catalogue of ``icectl validate`` and the findings rules report.

Every check belongs to one named :class:`Rule` (id, severity, one-line summary, spec section).
Area modules declare their rules with :func:`rule` at import time; :data:`CATALOGUE` then holds
them all in declaration order. A :class:`Finding` names the rule, the file, the entry (manifest
path and ordinal) and the values that disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from icectl.errors import UsageError


class Severity(str, Enum):
    ERROR = "error"  # breaks the spec: readers may return wrong rows or fail
    WARNING = "warning"  # off the spec's letter, but written by Iceberg Java and read fine by it

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Rule:
    id: str  # "<area>.<name>", stable: scripts select rules by it
    severity: Severity
    summary: str
    spec_section: str
    area: str = ""


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    file: str | None
    entry: str | None  # "<manifest path>#<ordinal>" for manifest entries, a JSON pointer-ish name otherwise
    message: str
    values: dict[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        return {"severity": str(self.severity), "rule": self.rule, "file": self.file, "entry": self.entry,
                "message": self.message, "values": self.values}


CATALOGUE: dict[str, Rule] = {}

AREAS = ("metadata", "manifest-list", "manifest", "deletes", "v4", "files")


def rule(rule_id: str, severity: Severity, summary: str, spec_section: str) -> Rule:
    """Declare a rule (at import time of its area module)."""
    area = rule_id.split(".", 1)[0]
    if area not in AREAS or rule_id in CATALOGUE:
        raise ValueError(f"bad or duplicate rule id {rule_id!r}")
    r = Rule(rule_id, severity, summary, spec_section, area)
    CATALOGUE[rule_id] = r
    return r


def select_rules(only: Iterable[str] | None, skip: Iterable[str] | None) -> frozenset[str]:
    """The rule ids to run: ``only`` (default all) minus ``skip``. An id may also name a whole area."""

    def expand(ids: Iterable[str], what: str) -> set[str]:
        out: set[str] = set()
        for rid in ids:
            if rid in CATALOGUE:
                out.add(rid)
            elif rid in AREAS:
                out.update(r for r, v in CATALOGUE.items() if v.area == rid)
            else:
                raise UsageError(f"unknown rule {rid!r} for {what}",
                                 hint="list the rules with 'icectl validate --list-rules'")
        return out

    chosen = expand(only, "--rule") if only else set(CATALOGUE)
    return frozenset(chosen - expand(skip or (), "--skip"))


class Reporter:
    """Collects findings of the enabled rules; the same finding (rule, file, entry) is kept once."""

    def __init__(self, enabled: frozenset[str]) -> None:
        self.enabled = enabled
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, str | None, str | None, str]] = set()

    def on(self, r: Rule) -> bool:
        return r.id in self.enabled

    def any_on(self, *rules: Rule) -> bool:
        return any(r.id in self.enabled for r in rules)

    def report(self, r: Rule, file: str | None, message: str, *, entry: str | None = None,
               **values: Any) -> None:
        if r.id not in self.enabled:
            return
        key = (r.id, file, entry, message)
        if key in self._seen:  # a manifest shared by many snapshots breaks a rule once
            return
        self._seen.add(key)
        self.findings.append(Finding(r.id, r.severity, file, entry, message, values))


def entry_name(manifest_path: str, ordinal: int) -> str:
    return f"{manifest_path}#{ordinal}"


def catalogue_rows() -> list[dict[str, Any]]:
    return [{"rule": r.id, "severity": str(r.severity), "summary": r.summary, "spec_section": r.spec_section}
            for r in CATALOGUE.values()]


def catalogue_markdown() -> str:
    """docs/validate-rules.md, generated from the catalogue (a test keeps the file in step)."""
    lines = [
        "# `icectl validate` rules",
        "",
        "Generated from `icectl/validate` (the catalogue `icectl validate --list-rules` prints); "
        "tests/unit/validate/test_validate.py fails when this file is stale. Regenerate with",
        "`python -c \"from icectl.validate import catalogue_markdown; print(catalogue_markdown(), end='')\" "
        "> docs/validate-rules.md`.",
        "",
        "Severity `error` means the table breaks the spec (exit code 7); `warning` means it is off the "
        "spec's letter in a way Iceberg Java itself writes and reads. Rules of the `files` area run "
        "only with `--deep`. `--rule` and `--skip` take rule ids or area names.",
        "",
        "The `v4` rules check format v4 as the Iceberg spec merged it on 2026-10-14 (docs/v4.md); the "
        "spec sections are the v4 text's headings. The `v4.spec-*` rules read roots and leaves as Parquet "
        "`tracked_file` manifests by field id; a root in icectl's earlier proposal layout is reported as "
        "`v4.spec-layout` and read through the proposal reader (an unreadable tree is `v4.spec-readable`).",
        "",
    ]
    for area in AREAS:
        rules = [r for r in CATALOGUE.values() if r.area == area]
        lines += [f"## {area}", "", "| rule | severity | what it checks | spec section |", "| --- | --- | --- | --- |"]
        lines += [f"| `{r.id}` | {r.severity} | {r.summary} | {r.spec_section} |" for r in rules]
        lines.append("")
    return "\n".join(lines)
