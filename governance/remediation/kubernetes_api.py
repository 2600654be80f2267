"""Kubernetes actions through the API with the service account's token: a pod owned by a Deployment (through its
ReplicaSet) or a StatefulSet has its owner scaled to zero (the `scale` subresource, a merge patch, as `kubectl scale`
sends it); a bare pod is deleted. Any other owner (a Job, a DaemonSet) is refused: scaling it would not free the GPU
or would take more than the job.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.conf import settings

from governance.remediation.executors import ActionResult

TIMEOUT_S = 10
MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    pass


class KubernetesApi:
    def __init__(self, *, base_url: str, token: str, ca_file: str = "") -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.context = ssl.create_default_context(cafile=ca_file or None) if base_url.startswith("https") else None

    @classmethod
    def from_settings(cls, base_url: str) -> KubernetesApi:
        token_file = Path(settings.REMEDIATION_K8S_TOKEN_FILE)
        token = token_file.read_text().strip() if token_file.exists() else ""
        ca = settings.REMEDIATION_K8S_CA_FILE
        return cls(base_url=base_url, token=token, ca_file=ca if ca and Path(ca).exists() else "")

    def call(self, method: str, path: str, body: dict | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.base_url}{path}", data=data, method=method)  # noqa: S310
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", MERGE_PATCH)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=self.context) as response:  # noqa: S310
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise ApiError(f"{method} {path}: HTTP {exc.code} {exc.read()[:300].decode(errors='replace')}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ApiError(f"{method} {path}: {exc}") from exc


def _controller(meta: dict) -> dict | None:
    owners = meta.get("ownerReferences") or []
    return next((o for o in owners if o.get("controller")), owners[0] if owners else None)


def _scale(api: KubernetesApi, namespace: str, kind: str, name: str) -> ActionResult:
    resource = {"Deployment": "deployments", "StatefulSet": "statefulsets", "ReplicaSet": "replicasets"}[kind]
    path = f"/apis/apps/v1/namespaces/{quote(namespace)}/{resource}/{quote(name)}/scale"
    api.call("PATCH", path, {"spec": {"replicas": 0}})
    return ActionResult(f"PATCH {path} replicas=0", True, f"{kind} {namespace}/{name} scaled to zero")


def pod_remediate(*, api: KubernetesApi, job_id: str) -> ActionResult:
    """Free the GPUs of pod `namespace/name`: scale its owner to zero, or delete it when it has none."""
    namespace, _, pod = job_id.partition("/")
    if not namespace or not pod:
        return ActionResult("", False, f"job id {job_id!r} is not namespace/pod")
    pod_path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}"
    try:
        owner = _controller(api.call("GET", pod_path).get("metadata", {}))
        if owner is None:
            api.call("DELETE", pod_path)
            return ActionResult(f"DELETE {pod_path}", True, f"bare pod {job_id} deleted")
        kind, name = owner.get("kind", ""), owner.get("name", "")
        if kind == "ReplicaSet":
            rs_path = f"/apis/apps/v1/namespaces/{quote(namespace)}/replicasets/{quote(name)}"
            top = _controller(api.call("GET", rs_path).get("metadata", {}))
            if top is not None and top.get("kind") == "Deployment":
                return _scale(api, namespace, "Deployment", top.get("name", ""))
            if top is not None:
                return ActionResult("", False, f"ReplicaSet {name} is owned by a {top.get('kind')}: not acted on")
            return _scale(api, namespace, "ReplicaSet", name)
        if kind == "StatefulSet":
            return _scale(api, namespace, "StatefulSet", name)
        return ActionResult("", False, f"pod {job_id} is owned by a {kind or 'resource'} {name}: not acted on")
    except ApiError as exc:
        return ActionResult(pod_path, False, str(exc))
