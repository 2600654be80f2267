"""The agent's own CPU cost per GPU sample, beside the cost of the NVML calls it makes (fake NVML, 8 GPUs).

The calls are recorded during the agent's rounds and replayed alone, so both figures come from one run.
"""

from __future__ import annotations

import io
import logging
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory

from benchmarks.harness import Out
from collectors.agent import Agent
from collectors.host import Host
from collectors.jobs import build_mapping
from collectors.sources import SourceConfig
from collectors.sources.nvml import NvmlSource
from collectors.testing import FakeNvml, RecordingNvml, h200

GPUS = 8
ROUNDS = 400


def _fake_host(root: Path) -> Host:
    host = Host(proc=root / "proc", sys=root / "sys")
    for node, cpus in ((0, "0-23"), (1, "24-47")):
        (host.sys / f"devices/system/node/node{node}").mkdir(parents=True)
        (host.sys / f"devices/system/node/node{node}/cpulist").write_text(cpus)
    for index in range(GPUS):
        for pid in (10291 + 100 * index, 10309 + 100 * index):
            (host.proc / str(pid)).mkdir(parents=True)
            (host.proc / str(pid) / "environ").write_bytes(f"SLURM_JOB_ID={4000 + index}\0".encode())
            (host.proc / str(pid) / "cgroup").write_text("0::/\n")
            (host.proc / str(pid) / "status").write_text("Cpus_allowed_list:\t0-23\n")
    return host


def run(out: Out) -> None:
    gpus = []
    for index in range(GPUS):
        gpu = h200(uuid=f"GPU-bench-{index:02d}", bus_id=f"00000000:{0x18 + index:02x}:00.0")
        for process in gpu.processes:
            process.pid += 100 * index
        gpus.append(gpu)
    nvml = RecordingNvml(FakeNvml(gpus))
    logging.getLogger("gpu-collector").setLevel(logging.WARNING)
    with TemporaryDirectory() as tmp:
        host = _fake_host(Path(tmp))
        config = SourceConfig(cluster="bench", node="n1", mapping=build_mapping(["slurm"], host=host), host=host)
        source = NvmlSource.open(config, nvml=nvml)
        start = datetime(2026, 11, 3, tzinfo=UTC)
        ticks = iter(range(10**9))
        agent = Agent(
            source=source, collector="bench", dry_run=io.BytesIO(), now=lambda: start + timedelta(minutes=next(ticks))
        )
        agent.sample()  # warm: static facts and the first GPM sample
        nvml.calls.clear()
        began = time.process_time()
        for _ in range(ROUNDS):
            agent.sample()
        agent_seconds = time.process_time() - began
        calls = list(nvml.calls)
        began = time.process_time()
        for function, args in calls:
            try:
                function(*args)
            except Exception:  # noqa: S110 - NotSupported answers are part of what is timed
                pass
        nvml_seconds = time.process_time() - began
        source.close()
    samples = ROUNDS * GPUS
    out("collector_us_per_gpu_sample", round(agent_seconds / samples * 1e6, 1))
    out("collector_nvml_calls_us_per_gpu_sample", round(nvml_seconds / samples * 1e6, 1))
