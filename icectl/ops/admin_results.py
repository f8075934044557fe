"""The results of the table administration commands (issue 14), one dataclass per command.

The same rules as :mod:`icectl.ops.results` (whose classes these share: ``CommandResult``,
``UNSET`` keys for what only a dry run or only a commit carries); kept apart so that module
stays readable. One section per command family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from icectl.results import UNSET, CommandResult, Part, Unset

# --------------------------------------------------------------------------- snapshot management
# (rollback, set-current, cherrypick, publish, fast-forward)


# --------------------------------------------------------------------------- branches and tags


# --------------------------------------------------------------------------- properties


# --------------------------------------------------------------------------- remove-orphan-files


# --------------------------------------------------------------------------- register and drop


__all__: list[str] = []
_UNUSED = (dataclass, field, Any, ClassVar, UNSET, CommandResult, Part, Unset)  # until the sections fill
