"""`gpu-collector`: read GPUs (or simulate them) and send the records to the server, or print them."""

from __future__ import annotations

import argparse
import sys
import urllib.request
from datetime import UTC, datetime, timedelta

from collectors.records import Record, encode, new_batch
from collectors.simulate import SimulatedCluster


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu-collector", description=__doc__)
    parser.add_argument("--source", choices=["simulate"], default="simulate")
    parser.add_argument("--server", help="base URL of gpu-governance, e.g. http://127.0.0.1:8000")
    parser.add_argument("--token", help="API token with the ingest scope")
    parser.add_argument("--cluster", default="demo")
    parser.add_argument("--gpus", type=int, default=8, help="simulated GPUs")
    parser.add_argument("--hours", type=float, default=0, help="simulate this much history instead of now")
    parser.add_argument("--interval", type=float, default=60, help="seconds between samples")
    parser.add_argument("--once", action="store_true", help="read once and exit")
    parser.add_argument("--dry-run", action="store_true", help="print records as JSON Lines instead of sending")
    args = parser.parse_args(argv)
    if not args.dry_run and not (args.server and args.token):
        parser.error("--server and --token are required unless --dry-run")
    return args


def read_records(args: argparse.Namespace) -> list[Record]:
    now = datetime.now(UTC).replace(microsecond=0)
    if args.hours:
        sim = SimulatedCluster(cluster=args.cluster, gpus=args.gpus, start=now - timedelta(hours=args.hours), end=now)
        return list(sim.history(timedelta(seconds=args.interval)))
    sim = SimulatedCluster(cluster=args.cluster, gpus=args.gpus, start=now - timedelta(days=2), end=now)
    running = [j for j in sim.job_records(now) if j.end_time is None and j.start_time is not None]
    return [*running, *sim.samples_at(now)]


def send(server: str, token: str, records: list[Record]) -> None:
    body = encode(new_batch("simulate", records))
    request = urllib.request.Request(  # noqa: S310 - the URL is the operator's
        server.rstrip("/") + "/api/v1/ingest/",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        response.read()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    records = read_records(args)
    if args.dry_run:
        out = sys.stdout.buffer
        for record in records:
            out.write(encode(record) + b"\n")
        out.flush()
    else:
        send(args.server, args.token, records)
    return 0
