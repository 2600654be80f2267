"""Session fixtures of a real Slurm (tests/slurm/cluster.py): one munged + slurmdbd and two clusters, started once
per test run and stopped by PID at its end.

- `slurm_gres`: cluster `gg-gres`, which accounts GPUs (AccountingStorageTRES=gres/gpu): sacct knows the count.
- `slurm_plain`: cluster `gg-plain`, which does not: sacct's TRES lack gres/gpu, only squeue knows the count.

Each is a `SlurmCluster`: `conf_dir`, `env` (SLURM_CONF for the CLI), `cli([...])`, `submit(command, gpus=...)`,
`wait_state(job, *states)`, `rest_url`, `token`, `rest_env` / `rest_headers` (slurmrestd with JWT auth). The tests
skip where Slurm cannot start (a program, the JWT plugin or MariaDB missing), and fail instead in CI (CI=true).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from tests.slurm.cluster import SlurmCluster, SlurmDbd, SlurmUnavailable, missing


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"Slurm cannot start in CI: {reason}")
    pytest.skip(f"Slurm cannot start here: {reason}")


@pytest.fixture(scope="session")
def slurm_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="gg-slurm-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_dbd(slurm_root: Path) -> Iterator[SlurmDbd]:
    if reason := missing():
        _unavailable(reason)
    try:
        dbd = SlurmDbd.start(slurm_root)
    except SlurmUnavailable as exc:
        _unavailable(str(exc))
    yield dbd
    dbd.stop()


def _cluster(dbd: SlurmDbd, name: str, *, gres_accounted: bool) -> Iterator[SlurmCluster]:
    try:
        cluster = SlurmCluster.start(dbd.root / name, dbd, name=name, gres_accounted=gres_accounted)
    except SlurmUnavailable as exc:
        _unavailable(str(exc))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def slurm_gres(slurm_dbd: SlurmDbd) -> Iterator[SlurmCluster]:
    yield from _cluster(slurm_dbd, "gg-gres", gres_accounted=True)


@pytest.fixture(scope="session")
def slurm_plain(slurm_dbd: SlurmDbd) -> Iterator[SlurmCluster]:
    yield from _cluster(slurm_dbd, "gg-plain", gres_accounted=False)
