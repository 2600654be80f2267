"""Which jobs a policy covers and which it spares: pure, the job's facts in, a reason out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase


def namespace_of(external_id: str) -> str:
    """A Kubernetes job is `namespace/pod`."""
    return external_id.split("/", 1)[0] if "/" in external_id else ""


def in_scope(
    *, team: str | None, teams: Iterable[str], partition: str, partitions: Iterable[str], namespace: str,
    namespaces: Iterable[str],
) -> bool:  # fmt: skip
    teams, partitions, namespaces = set(teams), set(partitions), set(namespaces)
    if teams and team not in teams:
        return False
    if partitions and partition not in partitions:
        return False
    return not (namespaces and namespace not in namespaces)


def exemption(
    *, user: str, name: str, labels: Mapping[str, str], exempt_users: Iterable[str], exempt_labels: Iterable[str],
    exempt_job_names: Iterable[str],
) -> str:  # fmt: skip
    """Why the job is exempt, or "" when it is not."""
    if user in set(exempt_users):
        return f"user {user} is exempt"
    for pair in exempt_labels:
        key, _, value = pair.partition("=")
        if key in labels and (not value or str(labels[key]) == value):
            return f"label {pair} is exempt"
    for pattern in exempt_job_names:
        if name and fnmatchcase(name, pattern):
            return f"job name {name} matches the exempt {pattern}"
    return ""
