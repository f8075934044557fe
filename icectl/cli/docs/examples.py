"""Examples per command: what a command line does, and the line (the man pages' EXAMPLES sections).

Keys are command paths as typed after ``icectl`` (``"inspect files"``); each example is (what it does,
the whole command line). tests/unit/cli/test_examples.py parses every line against the real app and
runs a few on a table of its own, so an example that stops working fails there.
"""

from __future__ import annotations

from typing import Any

Example = tuple[str, str]

EXAMPLES: dict[str, list[Example]] = {
    "": [
        ("Create the default file-system warehouse (./warehouse) with a first namespace",
         "icectl namespace create db --exist-ok"),
        ("The nightly job: apply every table's retention policy", "icectl expire-snapshots --all"),
        ("Use another config file (catalogs, storage) for one run",
         "icectl --config /etc/icectl/prod.toml list --all"),
    ],
    "add-files": [
        ("See exactly what would be written, then register the Parquet files as one append",
         "icectl add-files db.events /data/2024-03-01/ --dry-run"),
        ("Register files on a new branch starting at main's head",
         "icectl add-files db.events /data/backfill.parquet --branch backfill --create-branch"),
    ],
    "branch": [("List the branches with their retention", "icectl branch list db.events")],
    "branch create": [
        ("Create a branch that keeps its last 10 snapshots and is dropped after 30 days unchanged",
         "icectl branch create db.events audit --retain-last 10 --max-ref-age 30d"),
        ("Create a branch at a given snapshot", "icectl branch create db.events before-fix --snapshot 5842913458742"),
    ],
    "branch drop": [("Drop a branch if it is there", "icectl branch drop db.events audit --if-exists")],
    "branch list": [("Every branch, its head and retention, as JSON", "icectl branch list db.events --json")],
    "branch replace": [("Point a branch at the head of main", "icectl branch replace db.events audit --ref main")],
    "cache": [("Where the manifest cache is and how big", "icectl cache info")],
    "cache clear": [("Empty the manifest cache", "icectl cache clear")],
    "cache info": [("The cache folder, its size and limit", "icectl cache info --json")],
    "cherrypick": [("Apply one snapshot's change to main", "icectl cherrypick db.events 5842913458742")],
    "compact": [
        ("See the manifest groups, manifests in and out, and sizes; change nothing",
         "icectl compact db.events --dry-run"),
        ("Compact into 4 MiB manifests clustered by a partition field",
         "icectl compact db.events --target-size 4MiB --sort-by event_day"),
        ("Compact every table with at least 20 manifests in a group, one line per table",
         "icectl compact --all --min-manifests 20"),
    ],
    "rewrite-data-files": [
        ("See the file groups, files in and out, and the deletes applied; change nothing",
         "icectl rewrite-data-files db.events --dry-run"),
        ("Compact every partition with two or more small files into 128 MiB files",
         "icectl rewrite-data-files db.events --min-input-files 2 --target-file-size-bytes 128MiB"),
        ("Rewrite every data file of every table of a namespace, one line per table",
         "icectl rewrite-data-files --all sales --rewrite-all"),
        ("Cluster the rows of small files by two columns (z-order)",
         "icectl rewrite-data-files db.events --strategy sort --sort-order 'zorder(lat, lon)'"),
    ],
    "rewrite-position-delete-files": [
        ("See the delete file groups, files in and out and the dangling deletes dropped; change nothing",
         "icectl rewrite-position-delete-files db.events --dry-run"),
        ("Rewrite every position delete file (after rewrite-data-files made some dangling)",
         "icectl rewrite-position-delete-files db.events --rewrite-all"),
        ("Compact position deletes of every table of a namespace, one line per table",
         "icectl rewrite-position-delete-files --all sales"),
    ],
    "compute-partition-stats": [
        ("Write the current snapshot's partition statistics file and register it",
         "icectl compute-partition-stats db.events"),
        ("See which file a given snapshot's statistics would go to",
         "icectl compute-partition-stats db.events --snapshot 5842913458742 --dry-run"),
    ],
    "create": [
        ("Create a partitioned, sorted v3 table",
         'icectl create db.events --schema "id long not null, ts timestamptz, name string" '
         '--partition-by "days(ts), bucket(16, id)" --sort-by "id desc" --format-version 3'),
        ("See the metadata that would be written", 'icectl create db.scratch --schema "id long" --dry-run'),
    ],
    "drop": [
        ("Drop the catalog entry only; the files stay", "icectl drop db.scratch"),
        ("Drop the table and delete every file it reaches", "icectl drop db.scratch --purge"),
    ],
    "expire-snapshots": [
        ("Say the cutoff and each ref's policy, and what would be expired and deleted",
         "icectl expire-snapshots db.events --dry-run"),
        ("Expire snapshots older than 7 days, keeping at least the last 10 of each branch",
         "icectl expire-snapshots db.events --older-than 7d --retain-last 10"),
        ("Cron: every table of the catalog, one JSON line per table",
         "icectl expire-snapshots --all --json"),
        ("Refuse a run that would delete more than 10000 files",
         "icectl expire-snapshots db.events --max-deletes 10000"),
    ],
    "fast-forward": [("Fast-forward main to the head of a branch", "icectl fast-forward db.events main --to audit")],
    "health": [
        ("The figures, each check and what to run; exit 7 when a check is crossed", "icectl health db.events"),
        ("Cron: one JSON line per table", "icectl health --all --json"),
        ("The figures for node_exporter's textfile collector",
         "icectl health --all --prometheus /var/lib/node_exporter/textfile/icectl.prom"),
        ("Also the orphan files; and a page with the charts", "icectl health db.events --orphans --html health.html"),
    ],
    "inspect": [("A table's overview", "icectl inspect table db.events")],
    "inspect dvs": [("Deletion vectors of a v3 table, each checked", "icectl inspect dvs db.events")],
    "inspect entries": [("Manifest entries with their column metrics", "icectl inspect entries db.events --metrics")],
    "inspect files": [
        ("Live data files of the current snapshot", "icectl inspect files db.events --content data"),
        ("The files of a tag, as JSON", "icectl inspect files db.events --ref audit --json"),
    ],
    "inspect history": [("When each snapshot became current", "icectl inspect history db.events")],
    "inspect manifests": [("Every snapshot's manifests", "icectl inspect manifests db.events --all")],
    "inspect metadata-log": [("Earlier metadata files", "icectl inspect metadata-log db.events")],
    "inspect partitions": [("Records and files per partition", "icectl inspect partitions db.events")],
    "inspect refs": [("Branches and tags with retention", "icectl inspect refs db.events")],
    "inspect schema": [("The schema with field ids and types", "icectl inspect schema db.events"),
                       ("An earlier schema", "icectl inspect schema db.events --schema-id 0")],
    "inspect snapshots": [("Every snapshot", "icectl inspect snapshots db.events"),
                          ("A table directory (no catalog) as JSON",
                           "icectl inspect snapshots warehouse/db/events --json")],
    "inspect table": [("Overview by name", "icectl inspect table db.events"),
                      ("Overview of one metadata file",
                       "icectl inspect table warehouse/db/events/metadata/v3.metadata.json")],
    "inspect tree": [("The metadata tree of the current snapshot", "icectl inspect tree db.events")],
    "list": [("Tables of a namespace", "icectl list db"), ("Every table of the catalog", "icectl list --all")],
    "namespace": [("Namespaces of the catalog", "icectl namespace list")],
    "namespace create": [("Create a namespace; no error when it exists", "icectl namespace create db --exist-ok")],
    "namespace list": [("Namespaces of a catalog", "icectl namespace list --catalog local")],
    "properties": [("Properties with icectl's defaults too", "icectl properties list db.events --all")],
    "properties list": [("Properties set on the table", "icectl properties list db.events"),
                        ("Also the defaults of the properties icectl interprets",
                         "icectl properties list db.events --all")],
    "properties set": [("Keep 2 days of snapshots by default",
                        "icectl properties set db.events history.expire.max-snapshot-age-ms=172800000"),
                       ("Retry commits more often", "icectl properties set db.events commit.retry.num-retries=10")],
    "properties unset": [("Back to the default", "icectl properties unset db.events commit.retry.num-retries")],
    "publish": [("Publish a staged write-audit-publish write", "icectl publish db.events nightly-2024-03-01")],
    "register": [("Register existing metadata under a name",
                  "icectl register db.events s3://lake/db/events/metadata/00042-x.metadata.json")],
    "remove-files": [("Remove a v4 table's files of one partition, dry run first",
                      "icectl remove-files db.events --where ts_day=2024-03-01 --dry-run")],
    "remove-orphan-files": [
        ("List what would be deleted: files older than 3 days that no snapshot reaches",
         "icectl remove-orphan-files db.events --dry-run"),
        ("After expire-snapshots in the nightly job, every table",
         "icectl remove-orphan-files --all --older-than 7d"),
    ],
    "rollback": [("Undo the writes of the last 2 hours on main", "icectl rollback db.events --to-timestamp 2h"),
                 ("Roll back to a snapshot", "icectl rollback db.events --to-snapshot 5842913458742")],
    "set-current": [("Make any snapshot of the table current",
                     "icectl set-current db.events --snapshot 5842913458742")],
    "tag": [("List the tags", "icectl tag list db.events")],
    "tag create": [("Tag the current snapshot for a year", "icectl tag create db.events eoy-2024 --max-ref-age 365d")],
    "tag drop": [("Drop a tag", "icectl tag drop db.events eoy-2024")],
    "tag list": [("Tags as JSON", "icectl tag list db.events --json")],
    "tag replace": [("Move a tag to another snapshot",
                     "icectl tag replace db.events eoy-2024 --snapshot 5842913458742")],
    "upgrade": [("See what upgrading to v3 writes", "icectl upgrade db.events --to 3 --dry-run"),
                ("Upgrade to v2", "icectl upgrade db.events --to 2")],
    "validate": [
        ("Check the current snapshot: one row per broken rule, exit 7 on errors", "icectl validate db.events"),
        ("Check every snapshot and open the files; every finding as a row",
         "icectl validate db.events --all-snapshots --deep --verbose"),
        ("The rule catalogue", "icectl validate --list-rules"),
    ],
}


def examples_for(path: list[str]) -> list[Example]:
    """The examples of the command at ``path`` (``["inspect", "files"]``); none when it has none."""
    return EXAMPLES.get(" ".join(path), [])


def epilog(path: list[str]) -> str | None:
    """The examples as a ``--help`` epilog (None when the command has none)."""
    items = examples_for(path)
    if not items:
        return None
    lines = ["Examples:", "", "\b"]  # click prints a paragraph that starts with \b as written, unwrapped
    for what, line in items:
        lines += [f"{what}:", f"  {line}"]
    return "\n".join(lines)


def add_epilogs(command: Any, path: list[str]) -> None:
    """Give ``command`` (at ``path``) and the subcommands built with it (``branch create``) their
    examples as ``--help`` epilog; a lazy group's commands get theirs when they are built."""
    if getattr(command, "epilog", None) is None:
        command.epilog = epilog(path)
    commands = getattr(command, "commands", None)
    if isinstance(commands, dict):
        for name, sub in commands.items():
            add_epilogs(sub, [*path, name])
