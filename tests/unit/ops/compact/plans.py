"""Hand-made compaction plans for the loop (test_run.py) and the report (test_report.py): no table I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icectl.ops.compact.plan import Bin, GroupPlan
from icectl.ops.compact.run import Plan
from icectl.spec.manifest import ManifestContent, ManifestFile
from icectl.spec.snapshots import Snapshot

COMMIT_ID = "0f8e8d2c-1111-2222-3333-444455556666"


def manifest(path: str, length: int) -> ManifestFile:
    return ManifestFile(path, length, 0, ManifestContent.DATA, 1, 1, 1)


def group(manifests: list[ManifestFile], *, rewrite: bool, bins: int = 1, live: int = 0, deleted: int = 0,
          content: ManifestContent = ManifestContent.DATA, spec_id: int = 0) -> GroupPlan:
    return GroupPlan(spec_id, content, manifests, rewrite, "small manifests" if rewrite else "one manifest",
                     sort_by=("region",) if rewrite else (),
                     bins=[Bin([], 1000 + i) for i in range(bins)] if rewrite else [],
                     live_entries=live, deleted_entries=deleted)


@dataclass
class FakePlan(Plan[GroupPlan]):
    kept: int = 0

    @property
    def manifests_kept(self) -> int:
        return self.kept

    @property
    def listing_path(self) -> str:
        return f"{self.metadata_dir}/snap-{self.snapshot_id}-1-{self.commit_id}.avro"


def fake_plan(groups: list[GroupPlan], metadata_dir: str = "/wh/db/t/metadata", **kwargs: Any) -> FakePlan:
    return FakePlan(table="db.t", metadata=None, branch="main",  # type: ignore[arg-type]
                    base_snapshot=Snapshot(41, 1, manifest_list="/l.avro"), target_size=8 << 20, groups=groups,
                    snapshot_id=42, commit_id=COMMIT_ID, metadata_dir=metadata_dir, **kwargs)


@dataclass
class FakeWritten:
    group: Any
    entries: int
    path: str
    bytes: int | None
