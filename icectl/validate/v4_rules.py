"""The v4 rules on snapshots: which of ``manifest-list``/``root-manifest`` a snapshot has, that its
root exists, then the merged spec's rules on the root and its leaves
(:mod:`icectl.validate.v4_spec_rules`).

A root in the proposal layout that icectl wrote before the spec merged v4 is reported once per
snapshot (``v4.spec-layout``, a warning) and read through the proposal reader, which reports an
unreadable root or leaf; the proposal's own field rules are gone with the layout (run ``icectl
upgrade --to 4`` to rewrite such a table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icectl.codec.v4_manifest import is_parquet
from icectl.errors import CorruptInputError, IcectlError, NotFoundError, UnsupportedError
from icectl.spec.snapshots import Snapshot
from icectl.table import scan_v4_proposal as proposal
from icectl.table.scan_v4 import read_tree_entries, tree_manifests
from icectl.validate import v4_spec_rules
from icectl.validate.context import Context, LiveFile
from icectl.validate.manifest_list_rules import Listing
from icectl.validate.rules import Reporter, Severity, rule

E = Severity.ERROR

SNAPSHOT_KEY = rule("v4.snapshot-manifest-key", E,
                    "a snapshot has exactly one of manifest-list and root-manifest; root-manifest only in v4 tables, "
                    "and a snapshot whose parent has a root has one too", "Snapshots (v4: root-manifest)")
ROOT_EXISTS = rule("v4.root-exists", E, "every v4 snapshot's root manifest exists", "Snapshots (v4: root-manifest)")


@dataclass
class V4State:
    """Per run: the roots read, their rows, and --deep's live files (``lowest`` stays empty: v4
    leaves carry their own sequence numbers, checked per root)."""

    lowest: dict[str, Listing] = field(default_factory=dict)
    files: dict[str, LiveFile] = field(default_factory=dict)
    roots: int = 0
    entries: int = 0


def check_raw_snapshots(rep: Reporter, raw: Any, path: str) -> None:
    """Which of manifest-list/root-manifest each snapshot has (on the JSON: the model keeps both)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("snapshots"), list):
        return
    version = raw.get("format-version")
    snaps = [s for s in raw["snapshots"] if isinstance(s, dict)]
    has_root = {s.get("snapshot-id"): s.get("root-manifest") is not None for s in snaps}
    for i, s in enumerate(raw["snapshots"]):
        if not isinstance(s, dict):
            continue
        sid, where = s.get("snapshot-id"), f"snapshots[{i}]"
        listed = s.get("manifest-list") is not None or s.get("manifests") is not None
        rooted = s.get("root-manifest") is not None
        problem = None
        if rooted and isinstance(version, int) and version < 4:
            problem = f"has root-manifest in a format v{version} table"
        elif rooted and listed:
            problem = "has both manifest-list and root-manifest"
        elif listed and has_root.get(s.get("parent-snapshot-id")):
            problem = f"has a manifest list but its parent {s.get('parent-snapshot-id')} has a root manifest"
        if problem:
            rep.report(SNAPSHOT_KEY, path, f"snapshot {sid} {problem}", entry=where, snapshot_id=sid,
                       manifest_list=s.get("manifest-list"), root_manifest=s.get("root-manifest"))


def check_root_snapshot(ctx: Context, state: V4State, snap: Snapshot,
                        data: bytes | NotFoundError | None) -> None:
    """Every v4 rule of one snapshot: its root and its leaves."""
    rep = ctx.reporter
    root = snap.root_manifest or ""
    where = f"snapshot {snap.snapshot_id}"
    if data is None:
        try:
            data = ctx.io.read(root)
        except NotFoundError as err:
            data = err
    if isinstance(data, NotFoundError):
        rep.report(ROOT_EXISTS, root, f"{where}'s root manifest is missing ({data.message})", entry=where,
                   snapshot_id=snap.snapshot_id)
        return
    state.roots += 1
    if is_parquet(data):
        state.entries += v4_spec_rules.check_spec_root(ctx, snap, data)
        if ctx.deep:  # the spec rules reported any damage of the tree already
            _read_tree(ctx, state, snap, data, report=False)
        return
    rep.report(v4_spec_rules.SPEC_LAYOUT, root, f"{where}'s root is in icectl's earlier v4 layout (the "
               "proposal); run 'icectl upgrade --to 4' to rewrite it", entry=where)
    _read_tree(ctx, state, snap, data, report=True)


def _read_tree(ctx: Context, state: V4State, snap: Snapshot, data: bytes, *, report: bool) -> None:
    """Read the whole tree as every command does (``report``: a damage is a finding), collecting
    --deep's files."""
    md, root = ctx.metadata, snap.root_manifest or ""
    where = f"snapshot {snap.snapshot_id}"
    try:
        tree = (proposal.tree_manifests(md, snap, ctx.io, data) if not is_parquet(data)
                else _spec_tree(ctx, snap, data))
        for m in tree:
            for e in read_tree_entries(md, ctx.io, m, md.partition_type(m.partition_spec_id)):
                f = e.data_file
                if e.is_live and ctx.deep:
                    state.files.setdefault(f.file_path, LiveFile(f.file_path, f.file_size_in_bytes, f.record_count,
                                                                 f.file_format, int(f.content), root))
    except UnsupportedError as err:
        raise err.in_file(root) from None
    except CorruptInputError as err:
        if not report:
            return
        rep = ctx.reporter
        rep.report(v4_spec_rules.SPEC_READABLE, err.path or root, f"{where}'s tree cannot be read: {err.message}",
                   entry=where, snapshot_id=snap.snapshot_id)
    except NotFoundError as err:
        if not report:
            return
        ctx.reporter.report(ROOT_EXISTS, root, f"a manifest of {where} is missing ({err.message})", entry=where,
                            snapshot_id=snap.snapshot_id)
    except IcectlError as err:
        raise err.in_file(root) from None


def _spec_tree(ctx: Context, snap: Snapshot, data: bytes) -> list[Any]:
    return list(tree_manifests(ctx.metadata, snap, ctx.io, data))
