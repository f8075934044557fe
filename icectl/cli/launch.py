"""The console entry (``icectl`` and ``python -m icectl``).

A rows view's JSON that an identical earlier run recorded is replayed from the view cache
(:mod:`icectl.replay`) before the app and its libraries (typer, pyarrow, the read layer) are
imported: a warm ``inspect files --json`` then costs the interpreter's start and a ``stat`` per
file it came from. Any other run starts the app, recorded when it is a view that can be replayed.
"""

from __future__ import annotations

import os
import sys

from icectl import replay
from icectl.errors import ExitCode


def main() -> None:
    argv = sys.argv[1:]
    try:
        if replay.replay_or_record(argv, sys.stdout.buffer):
            return
    except BrokenPipeError:  # `icectl ... | head`: the reader went away, as the app treats it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return
    except OSError as e:  # stdout on a full disk: one line, as the app's error boundary says it
        sys.stderr.write(f"icectl: error: writing the output failed: {e}\n")
        raise SystemExit(ExitCode.INTERNAL) from None
    from icectl.cli.app import main as run_app

    run_app()
