"""Writing a policy from a command (the API's serializer checks the same through `policy_problems`): every bad value
is refused with the field and the reason, and nothing is written. Saves are audited by the model signals, so who
configured what, and when, is on the audit log; `created_by` says who made the policy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from governance.fleet.models import Cluster
from governance.org.models import Team, User
from governance.remediation.models import RemediationPolicy

LIST_FIELDS = ("partitions", "namespaces", "exempt_labels", "exempt_users", "exempt_job_names")
NEEDS_API_URL = "a Kubernetes policy needs the API server's address (api_url)"
QUIET_PAIR = "quiet hours need both a start and an end hour, or neither"
NOT_A_LIST = "must be a list of non-empty strings"
LABEL_FORM = 'each exemption is "key=value" (or "key": any value)'


def policy_problems(values: Mapping[str, Any]) -> dict[str, str]:
    """What is wrong with a policy's values taken together, by field (empty: nothing)."""
    problems: dict[str, str] = {}
    for name in LIST_FIELDS:
        items = values.get(name, [])
        if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
            problems[name] = NOT_A_LIST
    if "exempt_labels" not in problems and any(i.startswith("=") for i in values.get("exempt_labels", [])):
        problems["exempt_labels"] = LABEL_FORM
    if values.get("scheduler") == RemediationPolicy.Scheduler.KUBERNETES and not values.get("api_url"):
        problems["api_url"] = NEEDS_API_URL
    if (values.get("quiet_start_hour") is None) != (values.get("quiet_end_hour") is None):
        problems["quiet_end_hour"] = QUIET_PAIR
    return problems


def policy_save(
    *, name: str, cluster: str | None = None, teams: list[str] | None = None, by: User | None = None,
    **fields: Any,
) -> RemediationPolicy:  # fmt: skip
    """Create the policy `name` or change the fields given; raises ValidationError naming each bad field."""
    policy = RemediationPolicy.objects.filter(name=name).first() or RemediationPolicy(name=name, created_by=by)
    if cluster is not None:
        found = Cluster.objects.filter(name=cluster).first()
        if found is None:
            raise ValidationError({"cluster": f"no cluster named {cluster!r}"})
        policy.cluster = found
    elif policy.pk is None:
        raise ValidationError({"cluster": "a new policy needs a cluster"})
    for key, value in fields.items():
        setattr(policy, key, value)
    chosen: list[Team] | None = None
    if teams is not None:
        chosen = list(Team.objects.filter(slug__in=teams))
        unknown = sorted(set(teams) - {t.slug for t in chosen})
        if unknown:
            raise ValidationError({"teams": f"no team named {', '.join(unknown)}"})
    values = {f.name: getattr(policy, f.name) for f in policy._meta.concrete_fields}
    problems = policy_problems(values)
    try:
        policy.full_clean(exclude=["created_by"])
    except ValidationError as exc:
        problems |= {k: "; ".join(v) for k, v in exc.message_dict.items()}
    if problems:
        raise ValidationError(problems)
    with transaction.atomic():
        policy.save()
        if chosen is not None:
            policy.teams.set(chosen)
    return policy
