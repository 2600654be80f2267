"""When a held GPU sat idle, told apart, because each pattern has its own fix:

- after_work: the idle hours come after the last busy hour (the work ended, the job did not): end the job.
- from_start: the GPU never worked: the code is not on the GPU.
- intermittent: idle hours between busy ones while the job runs (data loading, checkpoints, evaluation, a queue):
  prefetch, checkpoint asynchronously, evaluate less often, scale elastically.
- night: an interactive session (notebook, dev box) idle mostly at night: stop it automatically when idle.

Pure: the hourly mean SM of one GPU in, the pattern and its idle hours out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

AFTER_WORK, FROM_START, INTERMITTENT, NIGHT = "after_work", "from_start", "intermittent", "night"
INTERACTIVE_KINDS = frozenset({"interactive", "notebook", "jupyter", "dev", "devbox"})
NIGHT_HOURS = frozenset({20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6})  # UTC
AFTER_WORK_SHARE = 0.8  # of the idle hours after the last busy one
NIGHT_SHARE = 0.6  # of an interactive session's idle hours at night


@dataclass(frozen=True)
class IdlePattern:
    pattern: str
    idle_hours: tuple[datetime, ...]
    busy_hours: int
    idle_after_work: int  # idle hours after the last busy hour
    idle_between: int  # idle hours between the first and the last busy hour
    switches: int  # changes between idle and busy from one hour to the next


def interactive(labels: Mapping[str, str]) -> bool:
    """A session a person works in (a notebook, a dev box), as its labels say."""
    return (labels.get("kind") or "").lower() in INTERACTIVE_KINDS or (labels.get("interactive") or "") in (
        "1",
        "true",
        "yes",
    )


def idle_pattern(
    hours: Sequence[tuple[datetime, float | None]], idle_sm: float, *, is_interactive: bool = False
) -> IdlePattern | None:
    """The pattern of one GPU's idle hours: `hours` are (hour, mean SM or None where unknown). None: never idle."""
    known = sorted((h, sm) for h, sm in hours if sm is not None)
    idle = [sm < idle_sm for _, sm in known]
    idle_hours = tuple(h for (h, _), i in zip(known, idle, strict=True) if i)
    if not idle_hours:
        return None
    busy_at = [n for n, i in enumerate(idle) if not i]
    switches = sum(1 for a, b in pairwise(idle) if a != b)
    if not busy_at:
        return IdlePattern(FROM_START, idle_hours, 0, 0, 0, switches)
    first, last = busy_at[0], busy_at[-1]
    after = sum(idle[last + 1 :])
    between = sum(idle[first:last])
    at_night = sum(1 for h in idle_hours if h.hour in NIGHT_HOURS)
    if is_interactive and at_night >= NIGHT_SHARE * len(idle_hours):
        pattern = NIGHT
    elif after >= AFTER_WORK_SHARE * len(idle_hours):
        pattern = AFTER_WORK
    else:
        pattern = INTERMITTENT
    return IdlePattern(pattern, idle_hours, len(busy_at), after, between, switches)
