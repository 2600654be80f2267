"""The node agent installs alone: its wheel (agent/), in a fresh virtual environment, brings nothing of the server.

The environment is built once per wheel content (var/agent-venv-<hash of the wheel's RECORD>) with the wheel's
dependencies from the package index, and reused by later runs until the agent's sources or metadata change.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from collectors.records import JobRecord, SampleRecord, decode_line

ROOT = Path(__file__).resolve().parents[2]
VAR = ROOT / "var"
SERVER_ONLY = ("django", "rest_framework", "celery", "psycopg", "plotly", "governance")


def wheel_build(out: Path) -> Path:
    """`pip wheel --no-deps ./agent` into `out`, from a clean build folder (setuptools keeps stale copies there)."""
    shutil.rmtree(ROOT / "agent" / "build", ignore_errors=True)
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT / "agent")],
            cwd=ROOT, check=True, capture_output=True, timeout=600,
        )  # fmt: skip
    finally:
        shutil.rmtree(ROOT / "agent" / "build", ignore_errors=True)
    (wheel,) = out.glob("gpu_governance_collector-*.whl")
    return wheel


def wheel_key(wheel: Path) -> str:
    """A hash of the wheel's content: its RECORD lists every file with its own hash (timestamps play no part)."""
    with zipfile.ZipFile(wheel) as archive:
        (record,) = (name for name in archive.namelist() if name.endswith(".dist-info/RECORD"))
        return hashlib.sha256(archive.read(record)).hexdigest()[:16]


def venv_with(wheel: Path) -> Path:
    """A virtual environment holding the wheel and its dependencies; built once per wheel content."""
    venv = VAR / f"agent-venv-{wheel_key(wheel)}"
    if (venv / ".ready").exists():
        return venv
    for stale in VAR.glob("agent-venv-*"):
        shutil.rmtree(stale)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True,
        timeout=600,
    )  # fmt: skip
    (venv / ".ready").touch()
    return venv


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return wheel_build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def agent_venv(wheel) -> Path:
    return venv_with(wheel)


def outside_the_repository(tmp_path: Path) -> dict[str, object]:
    """Run from a folder of its own, with no path or settings pointing back at this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV"}}
    return {"cwd": tmp_path, "env": env, "capture_output": True, "timeout": 120, "check": False}


INSTALLER = {"pip", "setuptools", "pkg_resources", "_distutils_hack", "distutils"}


def site_packages_mib(venv: Path) -> tuple[float, float]:
    """The environment's site-packages in MiB: all of it, and without the installer (pip, setuptools)."""
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    total = installer = 0
    for f in site.rglob("*"):
        if f.is_file() and not f.is_symlink():
            total += f.stat().st_size
            installer += f.stat().st_size if f.relative_to(site).parts[0].split("-")[0] in INSTALLER else 0
    return total / 2**20, (total - installer) / 2**20


def test_the_wheel_holds_every_file_of_collectors_and_nothing_of_the_server(wheel):
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}

    tracked = subprocess.run(["git", "ls-files", "collectors"], cwd=ROOT, capture_output=True, text=True, check=False)
    sources = set(tracked.stdout.split()) if tracked.returncode == 0 else set()
    if not sources:  # not a git checkout: every file there but caches
        sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "collectors").rglob("*") if p.is_file()}
        sources = {p for p in sources if "__pycache__" not in p}
    assert "collectors/records.py" in shipped  # the record contract the server imports: one copy, this one
    assert shipped == sources


def test_the_agent_requires_only_what_it_imports_and_the_kubelet_client_as_an_extra(wheel):
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        (entry_points,) = (n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))
        requires = [line.split(":", 1)[1].strip() for line in archive.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:")]  # fmt: skip
        commands = archive.read(entry_points).decode()

    names = {r.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip(): r for r in requires}
    assert set(names) == {"msgspec", "nvidia-ml-py", "prometheus-client", "grpcio", "protobuf"}
    assert 'extra == "kubelet"' in names["grpcio"] and 'extra == "kubelet"' in names["protobuf"]
    assert "gpu-collector = collectors.cli:main" in commands


def test_the_server_depends_on_the_agent_at_its_version_and_ships_no_copy_of_it():
    import tomllib

    server = tomllib.loads((ROOT / "pyproject.toml").read_text())
    agent = tomllib.loads((ROOT / "agent" / "pyproject.toml").read_text())

    assert f"gpu-governance-collector=={agent['project']['version']}" in server["project"]["dependencies"]
    assert server["tool"]["setuptools"]["packages"]["find"]["include"] == ["governance*"]
    assert "scripts" not in server["project"]  # gpu-collector is the agent's command


def test_django_celery_psycopg_and_plotly_are_not_importable_in_the_agent_environment(agent_venv, tmp_path):
    probe = "import importlib.util as u, json, sys; print(json.dumps({m: bool(u.find_spec(m)) for m in sys.argv[1:]}))"
    modules = [*SERVER_ONLY, "collectors.records", "msgspec", "pynvml", "grpc"]

    result = subprocess.run([agent_venv / "bin" / "python", "-c", probe, *modules], **outside_the_repository(tmp_path))

    found = json.loads(result.stdout)
    assert result.returncode == 0, result.stderr.decode()
    assert {m: found[m] for m in SERVER_ONLY} == dict.fromkeys(SERVER_ONLY, False)
    assert found["collectors.records"] and found["msgspec"] and found["pynvml"]
    assert found["grpc"] is False  # the kubelet client comes only with the extra


def test_the_installed_command_prints_valid_records_on_a_dry_run(agent_venv, tmp_path):
    command = [agent_venv / "bin" / "gpu-collector", "--source", "simulate", "--once", "--dry-run"]

    result = subprocess.run(command, **outside_the_repository(tmp_path))

    records = [r for line in result.stdout.splitlines() for r in decode_line(line)]
    assert result.returncode == 0, result.stderr.decode()
    assert sum(isinstance(r, SampleRecord) for r in records) == 8 and any(isinstance(r, JobRecord) for r in records)
    assert f"read={len(records)} sent=0 spooled=0 dropped=0 dead=0 (exit)" in result.stderr.decode()


@pytest.mark.django_db(transaction=True)
def test_the_installed_agent_sends_a_batch_the_server_stores(agent_venv, tmp_path, live_server, ingest_token):
    from governance.usage.models import IngestBatch, Job, Sample

    command = [
        agent_venv / "bin" / "gpu-collector", "--source", "simulate", "--gpus", "3", "--cluster", "c1",
        "--node", "agent-1", "--once", "--server", live_server.url, "--token", ingest_token,
    ]  # fmt: skip

    result = subprocess.run(command, **outside_the_repository(tmp_path))

    assert result.returncode == 0, result.stderr.decode()
    assert "sent=" in result.stderr.decode() and "spooled=0 dropped=0" in result.stderr.decode()
    batch = IngestBatch.objects.get()
    assert batch.collector == "simulate@agent-1" and batch.processed_at is not None
    assert Sample.objects.filter(gpu__cluster__name="c1").count() == 3 and Job.objects.exists()


def test_without_the_kubelet_extra_the_pod_resources_flag_says_what_to_install(agent_venv, tmp_path):
    command = [agent_venv / "bin" / "gpu-collector", "--source", "simulate", "--once", "--dry-run",
               "--k8s-pod-resources", str(tmp_path / "kubelet.sock")]  # fmt: skip

    result = subprocess.run(command, **outside_the_repository(tmp_path))

    stderr = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in stderr
    assert "pip install 'gpu-governance-collector[kubelet]'" in stderr


def test_the_agent_environment_stays_a_few_mib(agent_venv, capsys):
    total, packages = site_packages_mib(agent_venv)

    with capsys.disabled():
        print(f"\nagent site-packages: {total:.1f} MiB, {packages:.1f} MiB without pip and setuptools")
    assert packages < 10


def test_on_a_read_only_root_filesystem_the_agent_writes_only_its_spool(agent_venv, tmp_path):
    """As in the DaemonSet (readOnlyRootFilesystem, the spool a volume): everything read-only but the spool."""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare (util-linux) for a read-only mount namespace")
    spool = tmp_path / "spool"
    spool.mkdir()
    agent = f"{agent_venv}/bin/gpu-collector --source simulate --gpus 2 --once --server http://127.0.0.1:9 --token t"
    mounts = ["mount -o remount,bind,ro /"]  # then the venv and the working folder too, whatever their mounts
    mounts += [f"mount --bind {p} {p} && mount -o remount,bind,ro {p}" for p in (agent_venv, tmp_path)]
    mounts += [f"mount --bind {spool} {spool} && mount -o remount,bind,rw {spool}"]  # the spool volume
    probes = " ".join(f"{p}/probe" for p in (agent_venv, tmp_path))
    script = (
        f"{{ {' && '.join(mounts)}; }} || exit 77; "
        f"for f in {probes}; do touch $f 2>/dev/null && exit 78; done; {agent} --spool {spool}"
    )

    result = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c", script], **outside_the_repository(tmp_path)
    )

    if result.returncode == 77:
        pytest.skip("this machine allows no mount namespace")
    assert result.returncode == 0, result.stderr.decode()  # 78: the root filesystem was still writable
    last = result.stderr.decode().splitlines()[-1]
    read = int(last.split("read=")[1].split()[0])
    assert read >= 2 and f"read={read} sent=0 spooled={read} dropped=0 dead=0 (exit)" in last
    assert len(list(spool.glob("*.batch.gz"))) == 1


def test_the_systemd_unit_verifies_with_the_installed_agent(agent_venv, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("needs systemd-analyze")
    unit = (ROOT / "docs" / "gpu-collector.service").read_text()
    assert "ExecStart=/opt/gpu-collector/bin/gpu-collector\n" in unit  # the venv the unit's comment installs
    (tmp_path / "gpu-collector.service").write_text(unit.replace("/opt/gpu-collector", str(agent_venv)))

    result = subprocess.run(["systemd-analyze", "verify", "gpu-collector.service"], **outside_the_repository(tmp_path))

    assert result.returncode == 0 and result.stderr.decode() == "", result.stderr.decode()
