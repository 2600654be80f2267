"""A pod's share of one GPU under MPS (CUDA Multi-Process Service): its clients' active thread percentage.

On Volta and later, MPS caps the SMs a client may use: `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` in the client's
environment, further bounded by the control daemon's setting (`set_default_active_thread_percentage`, default 100;
where the daemon's is lower, the daemon's is obeyed). So a pod's share is the lower of its spec's percentage and
the daemon's default, over 100; a pod that is an MPS client (its env names `CUDA_MPS_PIPE_DIRECTORY` or the
percentage) with no percentage of its own gets the daemon's default. 100% is the whole GPU, which the device ids
already say: None. The pods file gives a pod's containers' environment as `env` (name -> value).

The daemon is asked through its command-line client (`echo get_default_active_thread_percentage |
nvidia-cuda-mps-control`): once per round, and only when a pod on the node is an MPS client.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Any

from collectors.records import GPUS_QUANTUM

log = logging.getLogger("gpu-collector")
PERCENTAGE = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
PIPE_DIRECTORY = "CUDA_MPS_PIPE_DIRECTORY"
CONTROL = ("nvidia-cuda-mps-control",)
QUERY = "get_default_active_thread_percentage\n"


def _percent(value: Any) -> Decimal | None:
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() and 0 < number <= 100 else None


def mps_client(pod: dict[str, Any]) -> bool:
    env = pod.get("env")
    return isinstance(env, dict) and (PERCENTAGE in env or PIPE_DIRECTORY in env)


def mps_share(pod: dict[str, Any], daemon_percent: Decimal | None) -> Decimal | None:
    """The share of one GPU an MPS client pod may use, or None where it is no client, its percentage is malformed,
    or it may use the whole GPU."""
    if not mps_client(pod):
        return None
    env: dict[str, Any] = pod["env"]
    own = _percent(env[PERCENTAGE]) if PERCENTAGE in env else None
    if PERCENTAGE in env and own is None:
        return None  # a malformed percentage says nothing
    known = [p for p in (own, daemon_percent) if p is not None]
    if not known:
        return None
    share = (min(known) / 100).quantize(GPUS_QUANTUM, ROUND_DOWN)
    return share if 0 < share < 1 else None


class MpsControl:
    """The MPS control daemon, asked through its command-line client. None where it cannot answer."""

    def __init__(self, command: Sequence[str] = CONTROL, timeout: float = 5.0) -> None:
        self.command, self.timeout = tuple(command), timeout
        self.warned = False

    def default_percentage(self) -> Decimal | None:
        try:
            # The command is the operator's own (--mps-control), split without a shell.
            done = subprocess.run(  # noqa: S603
                self.command, input=QUERY, capture_output=True, text=True, timeout=self.timeout, check=True
            )
        except (OSError, subprocess.SubprocessError) as exc:
            if not self.warned:
                self.warned = True
                log.warning("MPS control daemon did not answer (%s); MPS pods' shares are their own env's only", exc)
            return None
        self.warned = False
        words = done.stdout.split()
        return _percent(words[0]) if words else None
