"""Long terminal output through a pager, as git does.

Only when stdout is a terminal and the text is taller than it; ``--no-pager`` turns it off. The
command is ``$ICECTL_PAGER``, else ``$PAGER``, else ``less -FRX`` (quit at once if it fits, keep
colours, leave the text on the screen); an empty command or ``cat`` means no pager. ``LESS=FRX``
is set for less when the environment has no ``LESS``, as git sets it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TextIO

DEFAULT_PAGER = "less -FRX"


def pager_command() -> str | None:
    """The pager to run, or None for none."""
    for var in ("ICECTL_PAGER", "PAGER"):
        cmd = os.environ.get(var)
        if cmd is not None:
            break
    else:
        cmd = DEFAULT_PAGER
    cmd = cmd.strip()
    if cmd in ("", "cat"):
        return None
    program = cmd.split()[0]
    # A pager that is not installed would swallow the output: print it instead.
    return cmd if "=" in program or shutil.which(program) else None


def wants_pager(text: str, out: TextIO, enabled: bool) -> bool:
    if not enabled or out is not sys.stdout or not out.isatty():
        return False
    height = shutil.get_terminal_size().lines
    return text.count("\n") > height


def page(text: str, out: TextIO, *, enabled: bool = True) -> None:
    """Write ``text`` to ``out``, through the pager when it is a terminal and ``text`` is taller."""
    cmd = pager_command() if wants_pager(text, out, enabled) else None
    if cmd is None:
        out.write(text)
        out.flush()
        return
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    out.flush()
    proc = subprocess.Popen(cmd, shell=True, stdin=subprocess.PIPE, env=env)  # a command line, as git runs it
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode(out.encoding or "utf-8", errors="replace"))
        proc.stdin.close()
    except BrokenPipeError:  # the reader quit before the end (q in less): not an error
        pass
    proc.wait()
