"""`gpu-collector`: read the node's GPUs (nvml, dcgm, or simulated) and send the records to the server.

Every flag can also come from the environment: --dcgm-url from GPU_COLLECTOR_DCGM_URL, and so on.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import socket
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from collectors.agent import Agent
from collectors.host import Host
from collectors.jobs import MAPPERS, build_mapping
from collectors.records import JobRecord, Record
from collectors.sender import Sender
from collectors.sources import NAMES, SourceConfig, SourceUnavailable, source_open
from collectors.spool import Spool

log = logging.getLogger("gpu-collector")
ENV_PREFIX = "GPU_COLLECTOR_"


def _env(flag: str) -> str | None:
    return os.environ.get(ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper())


def _flag(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-collector", description=__doc__)

    def option(flag: str, **kwargs: object) -> None:
        env = _env(flag)
        if kwargs.get("action") == "store_true":
            kwargs["default"] = _flag(env) if env is not None else False
        elif env is not None:
            kwargs["default"] = kwargs["type"](env) if "type" in kwargs else env  # type: ignore[operator]
        parser.add_argument(flag, **kwargs)  # type: ignore[arg-type]

    option("--source", choices=NAMES, default="simulate")
    option("--server", help="base URL of gpu-governance, e.g. https://gpu-governance.example.org")
    option("--token", help="API token with the ingest scope")
    option("--interval", type=float, default=60.0, help="seconds between samples")
    option("--spool", help="directory for batches the server has not taken yet")
    option("--spool-max-mb", type=float, default=256.0, help="bound of the spool; the oldest batches go first")
    option(
        "--dead-letter-max-mb", type=float, default=64.0,
        help="bound of the spool's dead/ folder (batches the server refused for their content); full, it keeps them",
    )  # fmt: skip
    option("--batch-size", type=int, default=5000, help="records per batch at most")
    option("--batch-seconds", type=float, default=60.0, help="send a batch once its oldest record is this old")
    option("--report-seconds", type=float, default=300.0, help="log the counters this often")
    option("--cluster", default="demo")
    option("--node", default=socket.gethostname())
    option("--gpus", type=int, default=8, help="simulated GPUs")
    option("--hours", type=float, default=0.0, help="simulate: send this much history, then exit")
    option("--dcgm-url", default="http://127.0.0.1:9400/metrics")
    option(
        "--jobs",
        default="slurm,kubernetes,label",
        help=f"job mappers in order, of {', '.join(MAPPERS) or 'slurm, kubernetes, label'}",
    )
    option("--job-env", default="GPU_COLLECTOR_JOB", help="label mapper: the environment variable naming the job")
    option("--k8s-pods-file", help="kubernetes mapper: JSON of pod uid -> namespace, name, labels")
    option("--slurm-jobs", action="store_true", help="send job records from sacct/squeue for the jobs seen")
    option("--slurm-rest", help="read those job records from slurmrestd at this URL (token in SLURM_JWT)")
    option("--slurm-rest-version", default="v0.0.43", help="slurmrestd's data_parser version in its paths")
    option("--k8s-jobs", action="store_true", help="send a job record for each pod seen holding GPUs")
    option("--k8s-pod-resources", help="kubelet pod-resources socket, e.g. /var/lib/kubelet/pod-resources/kubelet.sock")
    option(
        "--mps-control",
        help="the MPS control daemon's client (e.g. nvidia-cuda-mps-control): an MPS client pod's share is bounded by "
        "its default active thread percentage",
    )
    option("--proc", default="/proc", help="root of /proc (a host mount in a container)")
    option("--sys", default="/sys", help="root of /sys")
    option("--once", action="store_true", help="read once, send, and exit")
    option(
        "--topology",
        help="report the node's GPU topology at start: nvml, nvidia-smi (runs `nvidia-smi topo -m`), or a file "
        "holding that command's output",
    )
    option("--dry-run", action="store_true", help="print each batch on a line as the ingest API takes it; no sending")
    option("--log-level", default="INFO")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.dry_run and not (args.server and args.token):
        parser.error("--server and --token are required unless --dry-run (or GPU_COLLECTOR_SERVER/_TOKEN)")
    if args.interval <= 0 or args.batch_size < 1 or args.gpus < 1:
        parser.error("--interval, --batch-size and --gpus must be positive")
    return args


def build_agent(args: argparse.Namespace) -> Agent:
    host = Host(proc=Path(args.proc), sys=Path(args.sys))
    names = [n.strip() for n in args.jobs.split(",") if n.strip()]
    mapping = build_mapping(names, host=host, job_env=args.job_env, k8s_pods_file=args.k8s_pods_file)
    config = SourceConfig(
        cluster=args.cluster, node=args.node, mapping=mapping, host=host, gpus=args.gpus, dcgm_url=args.dcgm_url
    )
    source = source_open(args.source, config)
    sender = None if args.dry_run else Sender(args.server, args.token)
    spool = None
    if args.spool:
        mib = 1024 * 1024
        spool = Spool(
            Path(args.spool), max_bytes=int(args.spool_max_mb * mib), dead_max_bytes=int(args.dead_letter_max_mb * mib)
        )
    return Agent(
        source=source, collector=f"{args.source}@{args.node}", sender=sender, spool=spool, interval=args.interval,
        batch_size=args.batch_size, batch_seconds=args.batch_seconds, report_seconds=args.report_seconds,
        jobs=build_describers(args), dry_run=sys.stdout.buffer if args.dry_run else None,
    )  # fmt: skip


def build_describers(args: argparse.Namespace) -> Callable[[list[Record], datetime], list[Record]] | None:
    """The sources of job records, pods first (they give job ids to the samples of GPUs they hold)."""
    describers: list[Callable[[list[Record], datetime], list[JobRecord]]] = []
    if args.k8s_jobs or args.k8s_pod_resources:
        from collectors.mps import MpsControl
        from collectors.podresources import PodResources
        from collectors.pods import KubernetesPods

        lister = PodResources(args.k8s_pod_resources) if args.k8s_pod_resources else None
        mps = MpsControl(shlex.split(args.mps_control)) if args.mps_control else None
        describers.append(
            KubernetesPods(cluster=args.cluster, pod_resources=lister, pods_file=args.k8s_pods_file, mps=mps).describe
        )
    if args.slurm_jobs or args.slurm_rest:
        from collectors.slurm import SlurmJobs, SlurmRest, jobs_read

        read = SlurmRest(args.slurm_rest, version=args.slurm_rest_version).jobs_read if args.slurm_rest else jobs_read
        describers.append(SlurmJobs(cluster=args.cluster, read=read).describe)
    if not describers:
        return None
    return lambda records, now: [job for describe in describers for job in describe(records, now)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s gpu-collector %(levelname)s %(message)s")
    try:
        agent = build_agent(args)
    except (SourceUnavailable, ValueError) as exc:
        print(f"gpu-collector: {exc}", file=sys.stderr)
        return 2
    if args.topology:
        _report_topology(args)
    signal.signal(signal.SIGTERM, agent.stop)
    signal.signal(signal.SIGINT, agent.stop)
    if args.hours and args.source == "simulate":
        return _send_history(agent, args)
    agent.run(once=args.once)
    return 0


def _report_topology(args: argparse.Namespace) -> None:
    """Read and send the node's topology once; a failure is logged, never fatal (sampling matters more)."""
    from collectors.topology import topology_read, topology_send

    try:
        topology, source = topology_read(args.topology)
        report = topology.report(cluster=args.cluster, node=args.node, source=source)
        if args.dry_run:
            import msgspec

            print(msgspec.json.encode(report).decode(), file=sys.stderr)
        else:
            topology_send(report, Sender(args.server, args.token))
            log.info("topology of %s sent: %d GPUs (%s)", args.node, topology.gpus, source)
    except Exception as exc:
        log.warning("topology not reported: %s", exc)


def _send_history(agent: Agent, args: argparse.Namespace) -> int:
    from collectors.simulate import SimulatedCluster

    now = datetime.now(UTC).replace(microsecond=0)
    sim = SimulatedCluster(cluster=args.cluster, gpus=args.gpus, start=now - timedelta(hours=args.hours), end=now)
    agent.take(sim.history(timedelta(seconds=args.interval)))
    agent.flush()
    agent.report("exit")
    return 0
