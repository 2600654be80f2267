import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from collectors.records import SampleRecord, decode_line
from tests.collectors.test_agent import closed_port_url

ROOT = Path(__file__).resolve().parents[2]


def collector(*args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "collectors", *args], cwd=ROOT, capture_output=True, env={**os.environ, **(env or {})},
        timeout=60, check=False, **kwargs,
    )  # fmt: skip


def test_a_dry_run_prints_valid_records_and_the_counters_on_exit():
    result = collector("--source", "simulate", "--gpus", "8", "--once", "--dry-run")

    records = [r for line in result.stdout.splitlines() for r in decode_line(line)]
    assert result.returncode == 0
    assert sum(isinstance(r, SampleRecord) for r in records) == 8
    assert f"read={len(records)} sent=0 spooled=0 dropped=0" in result.stderr.decode()


def test_every_flag_can_come_from_the_environment():
    result = collector("--once", env={"GPU_COLLECTOR_DRY_RUN": "1", "GPU_COLLECTOR_GPUS": "3"})

    records = [r for line in result.stdout.splitlines() for r in decode_line(line)]
    assert sum(isinstance(r, SampleRecord) for r in records) == 3


def test_without_a_driver_the_nvml_source_says_so_and_exits_non_zero():
    result = collector("--source", "nvml", "--once", "--dry-run")

    assert result.returncode == 2
    assert "cannot initialise NVML" in result.stderr.decode() and "Traceback" not in result.stderr.decode()


def test_sending_needs_a_server_and_a_token():
    result = collector("--once")

    assert result.returncode == 2 and "--server and --token are required" in result.stderr.decode()


def test_sigterm_flushes_what_was_read_into_the_spool_and_logs_the_counters(tmp_path):
    spool = tmp_path / "spool"
    args = ["--source", "simulate", "--gpus", "4", "--interval", "60", "--batch-seconds", "3600", "--spool", str(spool)]
    args += ["--server", closed_port_url(), "--token", "t"]
    process = subprocess.Popen([sys.executable, "-m", "collectors", *args], cwd=ROOT, stderr=subprocess.PIPE)
    time.sleep(2)  # one round read, waiting for the next

    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)

    assert process.returncode == 0
    last = stderr.decode().strip().splitlines()[-1]
    assert "spooled=" in last and "(exit)" in last
    read = int(last.split("read=")[1].split()[0])
    assert read >= 4 and f"sent=0 spooled={read} dropped=0" in last
    assert len(list(spool.glob("*.batch.gz"))) == 1


def test_the_dcgm_source_with_the_kubelet_describes_the_pods_it_sees(tmp_path):
    from collectors.records import JobRecord
    from tests.collectors.servers import kubelet_served, pages_served
    from tests.collectors.test_dcgm import EKS, page
    from tests.collectors.test_pods import GPU1

    with kubelet_served(tmp_path) as (kubelet, socket), pages_served({"/metrics": page(EKS)}) as url:
        kubelet.pods = [("ml", "trainer-0", {"nvidia.com/gpu": [GPU1]})]
        result = collector(
            "--source", "dcgm", "--dcgm-url", f"{url}/metrics", "--cluster", "eks", "--k8s-jobs",
            "--k8s-pod-resources", socket, "--once", "--dry-run",
        )  # fmt: skip

    records = [r for line in result.stdout.splitlines() for r in decode_line(line)]
    assert result.returncode == 0, result.stderr.decode()
    assert sorted((r.job_id, r.project, r.gpus) for r in records if isinstance(r, JobRecord)) == [
        ("dynamo-workload/vllm-agg-0-vllmdecodeworker-s65j5", "dynamo-workload", 1),
        ("ml/trainer-0", "ml", 1),
    ]
    assert sum(isinstance(r, SampleRecord) for r in records) == 8
