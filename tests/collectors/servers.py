"""Real servers for the collectors' tests: an HTTP server of fixed pages (dcgm-exporter, slurmrestd) and a
kubelet pod-resources gRPC server on a unix socket."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc

from collectors.podresources import api_pb2, api_pb2_grpc


@contextmanager
def pages_served(pages: dict[str, str]) -> Iterator[str]:
    """Serve `pages` (path -> text; the dict may change while serving); yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write((body or "").encode())

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


class Kubelet(api_pb2_grpc.PodResourcesListerServicer):
    """The kubelet's PodResourcesLister: `pods` is (namespace, name, {resource name: [device ids]}) per pod."""

    def __init__(self) -> None:
        self.pods: list[tuple[str, str, dict[str, list[str]]]] = []
        self.allocatable: dict[str, list[str]] = {}  # resource name -> the node's device ids

    def GetAllocatableResources(self, request, context):
        return api_pb2.AllocatableResourcesResponse(
            devices=[api_pb2.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in self.allocatable.items()]
        )

    def List(self, request, context):
        return api_pb2.ListPodResourcesResponse(
            pod_resources=[
                api_pb2.PodResources(
                    name=name,
                    namespace=namespace,
                    containers=[
                        api_pb2.ContainerResources(
                            name="main",
                            devices=[
                                api_pb2.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in res.items()
                            ],
                            cpu_ids=[0, 1],
                        )
                    ],
                )
                for namespace, name, res in self.pods
            ]
        )


@contextmanager
def kubelet_served(folder: Path) -> Iterator[tuple[Kubelet, str]]:
    """A pod-resources server on `folder`/kubelet.sock; yields the servicer (set its pods) and the socket path."""
    kubelet = Kubelet()
    socket = str(folder / "kubelet.sock")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(kubelet, server)
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        yield kubelet, socket
    finally:
        server.stop(grace=None)
