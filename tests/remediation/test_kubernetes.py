"""Kubernetes actions against a recorded API exchange: a local server answers each request with the recorded
response, in order, and keeps the requests the client sent, which the tests check (method, path, token, body)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from governance.remediation.kubernetes_api import MERGE_PATCH, KubernetesApi, pod_remediate

TOKEN = "sa-token-0123"
POD = "/api/v1/namespaces/ml/pods/trainer-7f9c-x2"
RS = "/apis/apps/v1/namespaces/ml/replicasets/trainer-7f9c"
SCALE = "/apis/apps/v1/namespaces/ml/deployments/trainer/scale"


def owned_by(kind: str, name: str) -> dict:
    return {"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": name,
                                              "controller": True}]}}  # fmt: skip


class Exchange:
    """The recorded exchange: (method, path) -> (status, body), answered in order; what was sent, kept."""

    def __init__(self, recorded: list[tuple[str, str, int, dict]]) -> None:
        self.recorded, self.sent = list(recorded), []

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length)) if length else None
        self.sent.append((handler.command, handler.path, dict(handler.headers), body))
        method, path, status, response = self.recorded.pop(0) if self.recorded else ("", "", 500, {})
        if (method, path) != (handler.command, handler.path):
            status, response = 500, {"message": f"not in the recording: {handler.command} {handler.path}"}
        data = json.dumps(response).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


@pytest.fixture
def server() -> Iterator[tuple[str, list]]:
    current: list[Exchange] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            current[0].answer(self)

        do_PATCH = do_DELETE = do_GET

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", current
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def replay(server, recorded: list[tuple[str, str, int, dict]]):
    url, current = server
    current[:] = [Exchange(recorded)]
    result = pod_remediate(api=KubernetesApi(base_url=url, token=TOKEN), job_id="ml/trainer-7f9c-x2")
    return result, current[0].sent


def test_a_deployments_pod_has_its_deployment_scaled_to_zero_through_the_scale_subresource(server):
    result, sent = replay(server, [
        ("GET", POD, 200, owned_by("ReplicaSet", "trainer-7f9c")),
        ("GET", RS, 200, owned_by("Deployment", "trainer")),
        ("PATCH", SCALE, 200, {"kind": "Scale", "spec": {"replicas": 0}}),
    ])  # fmt: skip

    assert [(m, p) for m, p, _, _ in sent] == [("GET", POD), ("GET", RS), ("PATCH", SCALE)]
    assert all(h["Authorization"] == f"Bearer {TOKEN}" for _, _, h, _ in sent)
    _, _, headers, body = sent[-1]
    assert (headers["Content-Type"], body) == (MERGE_PATCH, {"spec": {"replicas": 0}})
    assert (result.ok, result.command) == (True, f"PATCH {SCALE} replicas=0")


def test_a_statefulsets_pod_has_its_statefulset_scaled_to_zero(server):
    scale = "/apis/apps/v1/namespaces/ml/statefulsets/notebook/scale"
    result, sent = replay(server, [("GET", POD, 200, owned_by("StatefulSet", "notebook")), ("PATCH", scale, 200, {})])

    assert [(m, p, b) for m, p, _, b in sent] == [("GET", POD, None), ("PATCH", scale, {"spec": {"replicas": 0}})]
    assert result.ok


def test_a_bare_pod_is_deleted(server):
    result, sent = replay(server, [("GET", POD, 200, {"metadata": {"name": "trainer-7f9c-x2"}}),
                                   ("DELETE", POD, 200, {"status": "Success"})])  # fmt: skip

    assert [(m, p) for m, p, _, _ in sent] == [("GET", POD), ("DELETE", POD)]
    assert (result.ok, result.command) == (True, f"DELETE {POD}")


def test_a_pod_of_a_job_or_daemonset_is_refused_without_a_write(server):
    result, sent = replay(server, [("GET", POD, 200, owned_by("DaemonSet", "dcgm-exporter"))])

    assert [m for m, _, _, _ in sent] == ["GET"]
    assert not result.ok and "owned by a DaemonSet dcgm-exporter: not acted on" in result.output


def test_a_refusal_of_the_api_is_a_failed_action_with_its_answer(server):
    result, _ = replay(server, [("GET", POD, 200, owned_by("StatefulSet", "notebook")),
                                ("PATCH", "/apis/apps/v1/namespaces/ml/statefulsets/notebook/scale", 403,
                                 {"message": "forbidden: cannot patch statefulsets/scale"})])  # fmt: skip

    assert not result.ok and "HTTP 403" in result.output and "cannot patch statefulsets/scale" in result.output


def test_the_check_scales_an_idle_pods_deployment_after_two_warnings(server, jobs, tmp_path, settings):
    from governance.remediation.models import RemediationStep
    from tests.remediation.conftest import T0, idle_job, minutes, policy, rounds

    url, current = server
    current[:] = [Exchange([
        ("GET", POD, 200, owned_by("ReplicaSet", "trainer-7f9c")),
        ("GET", RS, 200, owned_by("Deployment", "trainer")),
        ("PATCH", SCALE, 200, {"kind": "Scale", "spec": {"replicas": 0}}),
    ])]  # fmt: skip
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    settings.REMEDIATION_K8S_TOKEN_FILE = str(token)
    job = "ml/trainer-7f9c-x2"
    idle_job(jobs, job, labels={"kind": "training"})
    policy(scheduler="kubernetes", api_url=url, namespaces=["ml"])

    rounds(jobs, [T0, T0 + minutes(30), T0 + minutes(60)], job_ids=(job,))

    steps = RemediationStep.objects.order_by("at", "id")
    assert [s.decision for s in steps] == ["warn", "warn_again", "act"]
    assert [(m, p) for m, p, _, _ in current[0].sent] == [("GET", POD), ("GET", RS), ("PATCH", SCALE)]
    act = steps.last()
    assert act.result == "Deployment ml/trainer scaled to zero"
    assert "for 24 h (no time limit known" in act.evidence["reclaim_basis"] and act.gpu_hours == 24
