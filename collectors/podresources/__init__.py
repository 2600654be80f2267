"""The kubelet's pod-resources API: which pod holds which GPU on this node (gRPC `List` on a unix socket).

dcgm-exporter reads the same API to label its series with pods; reading it here too bills a pod that holds a
GPU with no process on it (and flags it idle). `api.proto` is the published v1 API; `api_pb2.py` and
`api_pb2_grpc.py` are generated from it (grpcio-tools 1.85.1), from the repository root:

    python -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. collectors/podresources/api.proto

Device ids are what the device plugin reports: GPU UUIDs (the NVIDIA plugin's default id strategy), MIG
device UUIDs for MIG slices, and under time-slicing (or MPS) one id per replica of a GPU, `GPU-uuid::n`: a pod
holding one of a GPU's replicas holds that share of it. How many replicas each GPU has is what the kubelet lists
as allocatable (`GetAllocatableResources`).
"""

from __future__ import annotations

from collections import Counter

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"  # the device plugin's "mixed" MIG strategy: nvidia.com/mig-1g.10gb, ...
REPLICA = "::"  # GPU-uuid::n, the n-th replica of a time-sliced (or MPS-shared) GPU


def replica_gpu(device: str) -> str:
    """The GPU a device id names: the GPU of a replica id, else the id itself."""
    return device.partition(REPLICA)[0]


class PodResourcesUnavailable(Exception):
    """The kubelet's socket cannot be read; the message says what to check."""


class PodResources:
    """A client of one kubelet's PodResourcesLister; `held()` lists the GPUs pods hold right now."""

    def __init__(self, socket: str = SOCKET, *, timeout: float = 5.0) -> None:
        try:
            import grpc

            from collectors.podresources import api_pb2_grpc
        except ImportError as exc:
            raise ValueError(
                f"k8s-pod-resources: the kubelet API needs grpcio and protobuf ({exc.name} is missing): "
                "pip install 'gpu-governance-collector[kubelet]'"
            ) from None

        self.socket, self.timeout = socket, timeout
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.stub = api_pb2_grpc.PodResourcesListerStub(self.channel)

    def held(self) -> dict[str, tuple[str, str]]:
        """GPU (or MIG device) id -> (namespace, pod) of the pod holding it."""
        import grpc

        from collectors.podresources import api_pb2

        try:
            response = self.stub.List(api_pb2.ListPodResourcesRequest(), timeout=self.timeout)
        except grpc.RpcError as exc:
            raise PodResourcesUnavailable(
                f"kubelet pod-resources at {self.socket}: {exc.code().name} (is the socket mounted read-only "
                "from /var/lib/kubelet/pod-resources?)"
            ) from None
        held: dict[str, tuple[str, str]] = {}
        for pod in response.pod_resources:
            for container in pod.containers:
                for devices in container.devices:
                    if devices.resource_name == GPU or devices.resource_name.startswith(MIG_PREFIX):
                        for device in devices.device_ids:
                            held[device] = (pod.namespace, pod.name)
        return held

    def replicas(self) -> dict[str, int]:
        """GPU uuid -> how many replicas the device plugin made of it (time-slicing, MPS); GPUs not shared are not
        listed."""
        import grpc

        from collectors.podresources import api_pb2

        try:
            response = self.stub.GetAllocatableResources(api_pb2.AllocatableResourcesRequest(), timeout=self.timeout)
        except grpc.RpcError as exc:
            raise PodResourcesUnavailable(
                f"kubelet pod-resources at {self.socket}: GetAllocatableResources {exc.code().name} (the kubelet"
                " serves it from Kubernetes 1.23)"
            ) from None
        counts: Counter[str] = Counter()
        for devices in response.devices:
            if devices.resource_name == GPU:
                counts.update(replica_gpu(d) for d in devices.device_ids if REPLICA in d)
        return dict(counts)

    def close(self) -> None:
        self.channel.close()
