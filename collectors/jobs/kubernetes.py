"""Kubernetes: the pod uid in the process's cgroup path, named through a pods file where one is configured.

The pods file is JSON, {"<pod uid>": {"namespace": "...", "name": "...", "labels": {...}, "start_time": "..."}},
as written by a sidecar or an init step from the API (`kubectl get pods -o json` reshaped); without it the job
is the pod uid. collectors/pods.py reads the same file for the pods' labels and start times.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from collectors.host import Host
from collectors.jobs.base import register

# cgroupfs: .../pod0f1e2d3c-...; systemd: ...-pod0f1e2d3c_....slice (dashes become underscores).
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
JOB_LABEL = "gpu-governance/job"


@register
class KubernetesMapper:
    name = "kubernetes"

    def __init__(self, *, host: Host, k8s_pods_file: str | None = None, **_: str | None) -> None:
        self.host = host
        self.pods_file = Path(k8s_pods_file) if k8s_pods_file else None

    def _pods(self) -> dict[str, Any]:
        if self.pods_file is None:
            return {}
        try:
            return json.loads(self.pods_file.read_text())
        except FileNotFoundError:
            return {}

    def job_of(self, pid: int) -> str | None:
        for path in self.host.cgroup(pid):
            if match := _POD_UID.search(path):
                uid = match[1].replace("_", "-")
                return job_of_pod(uid, self._pods().get(uid))
        return None


def job_of_pod(uid: str, pod: dict[str, Any] | None) -> str:
    if not pod:
        return uid
    if job := pod.get("labels", {}).get(JOB_LABEL):
        return str(job)
    return f"{pod['namespace']}/{pod['name']}"
