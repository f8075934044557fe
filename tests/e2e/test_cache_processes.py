"""Several real processes share one manifest cache folder at once: writers, readers, a process that
clears the cache and one that drops foreign and broken files into it, with a size bound so small
that eviction runs all the time. Every read must be a miss or exactly the table put for that
(location, identity); no process may fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WORKER = r'''
import json, os, random, sys, time, traceback
import pyarrow as pa
from icectl.storage import FileIdentity
from icectl.table.manifest_cache import ManifestCache

root, seed, steps, role, bound = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
gate, parties = sys.argv[6], int(sys.argv[7])
cache = ManifestCache(root, max_bytes=bound)
rng = random.Random(seed)


def expected(i, v):
    n = 5 + (i * 7 + v * 13) % 60
    t = pa.table({"path": [f"/t/data/m{i}-v{v}-{k}.parquet" for k in range(n)],
                  "v": pa.array([v] * n, pa.int32()), "i": pa.array([i] * n, pa.int64())})
    return t.replace_schema_metadata({"manifest": f"m{i}", "version": str(v)})


stats = {"role": role, "gets": 0, "hits": 0, "puts": 0, "wrong": 0, "errors": [], "clears": 0, "vandal": 0}
# Start together (every process is up and imported), then run a fixed number of steps: how much each
# does never depends on how fast the machine is, only the interleaving does.
open(os.path.join(gate, f"{role}-{seed}"), "w").close()
waited = time.monotonic() + 120
while len(os.listdir(gate)) < parties and time.monotonic() < waited:
    time.sleep(0.01)
for _ in range(steps):
    i, v = rng.randrange(30), rng.randrange(3)
    ident, loc = FileIdentity(1000 + i, f"etag-{v}"), f"s3://b/t/metadata/m{i}.avro"
    r = rng.random()
    try:
        if role == "clearer" and r < 0.02:
            cache.clear()
            stats["clears"] += 1
        elif role == "vandal" and r < 0.2:
            # Never in place (icectl never writes an entry in place either): a new file renamed over
            # an entry's name, holding garbage, a truncated entry, or another key's entry.
            target = cache.path_of("manifest/1", loc, ident)
            other = cache.path_of("manifest/1", loc, FileIdentity(1000 + i, f"etag-{(v + 1) % 3}"))
            kind = rng.randrange(3)
            try:
                data = (os.urandom(rng.randrange(1, 4000)) if kind == 0
                        else other.read_bytes()[: None if kind == 2 else rng.randrange(1, 3000)])
            except FileNotFoundError:
                continue
            tmp = target.with_name(f"vandal-{os.getpid()}")
            tmp.write_bytes(data)
            os.replace(tmp, target)
            stats["vandal"] += 1
        elif r < 0.45:
            cache.put("manifest/1", loc, ident, expected(i, v))
            stats["puts"] += 1
        else:
            got = cache.get("manifest/1", loc, ident)
            stats["gets"] += 1
            if got is not None:
                stats["hits"] += 1
                want = expected(i, v)
                if not (got.equals(want) and got.schema.metadata == want.schema.metadata
                        and got.to_pylist() == want.to_pylist()):
                    stats["wrong"] += 1
    except Exception:
        stats["errors"].append(traceback.format_exc())
stats["writable"] = cache.writable
print(json.dumps(stats))
'''


def test_processes_hammering_one_cache_folder_never_get_a_wrong_table(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    root = tmp_path / "cache"
    bound = 60_000  # a few dozen entries: eviction is constant
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    roles = ["worker", "worker", "clearer", "vandal"]
    gate = tmp_path / "gate"
    gate.mkdir()
    steps = 1500  # each process's own count: the assertions below hold whatever the machine's speed
    procs = [subprocess.Popen([sys.executable, str(script), str(root), str(seed), str(steps), role, str(bound),
                               str(gate), str(len(roles))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for seed, role in enumerate(roles)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    for r in results:
        assert r["errors"] == [], r["errors"][:2]
        assert r["wrong"] == 0, r
        assert r["writable"], r  # nothing here is a disk failure
    assert sum(r["hits"] for r in results) > 50, results  # the cache did serve reads
    assert sum(r["puts"] for r in results) > 100, results
    assert next(r for r in results if r["role"] == "vandal")["vandal"] > 10, results
    assert next(r for r in results if r["role"] == "clearer")["clears"] > 0, results
    # Each process rescans the folder after writing a tenth of the bound: together they stay near it.
    on_disk = sum(f.stat().st_size for f in (root / "manifests").glob("*.arrow"))
    assert on_disk <= 1.5 * bound, on_disk
    assert not list((root / "manifests").glob(".tmp-*"))  # every writer renamed or removed its temp
