from argparse import ArgumentParser
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from governance.lib.doors import AuditedCommand
from governance.org.models import User
from governance.remediation.models import RemediationPolicy
from governance.remediation.policies import policy_save
from governance.remediation.selectors import dry_run_report

LISTS = {"partition": "partitions", "namespace": "namespaces", "exempt_label": "exempt_labels",
         "exempt_user": "exempt_users", "exempt_job_name": "exempt_job_names"}  # fmt: skip
SCALARS = ("mode", "condition", "grace_minutes", "max_actions_per_hour", "scheduler", "slurm_action", "api_url")


def _hours(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation as exc:
        raise CommandError(f"--idle-hours: {text!r} is not a number of hours") from exc


def _quiet(text: str) -> tuple[int | None, int | None]:
    if text in ("", "none"):
        return None, None
    start, _, end = text.partition("-")
    if not (start.isdigit() and end.isdigit()):
        raise CommandError(f"--quiet: {text!r} is not START-END in UTC hours (22-6), or none")
    return int(start), int(end)


class Command(AuditedCommand):
    help = "Create or change a remediation policy (only the options given change), or list the policies."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", nargs="?", help="The policy to create or change; none: list the policies.")
        parser.add_argument("--cluster")
        parser.add_argument("--mode", choices=RemediationPolicy.Mode.values)
        parser.add_argument("--condition", choices=RemediationPolicy.Condition.values)
        parser.add_argument("--idle-hours", type=_hours)
        parser.add_argument("--grace-minutes", type=int)
        parser.add_argument("--max-actions-per-hour", type=int)
        parser.add_argument("--quiet", help="Quiet hours START-END, UTC (22-6), or none.")
        parser.add_argument("--scheduler", choices=RemediationPolicy.Scheduler.values)
        parser.add_argument("--slurm-action", choices=RemediationPolicy.SlurmAction.values)
        parser.add_argument("--api-url", help="Kubernetes: the API server.")
        parser.add_argument("--teams", help="Team slugs, comma-separated; empty: every team.")
        for flag in LISTS:
            parser.add_argument(f"--{flag.replace('_', '-')}", action="append", help="Repeatable; replaces the list.")
        parser.add_argument("--by", help="The user who configures it (username), for the record.")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["name"]:
            for p in RemediationPolicy.objects.select_related("cluster").prefetch_related("teams"):
                teams = ",".join(t.slug for t in p.teams.all()) or "all teams"
                self.stdout.write(f"{p.name}: {p.cluster.name} {p.mode} {p.condition} {p.idle_hours} h, {teams}")
            for line in dry_run_report(user=User(is_superuser=True, role=User.Role.ADMIN)):
                self.stdout.write(f"dry run, last 30 days, {line.policy}: {line.warnings} warnings, {line.actions} "
                                  f"actions, {line.gpu_hours} GPU-hours, {line.cost} {line.currency}")  # fmt: skip
            return
        fields: dict[str, Any] = {k: options[k] for k in SCALARS if options[k] is not None}
        fields |= {field: options[flag] for flag, field in LISTS.items() if options[flag] is not None}
        if options["idle_hours"] is not None:
            fields["idle_hours"] = options["idle_hours"]
        if options["quiet"] is not None:
            fields["quiet_start_hour"], fields["quiet_end_hour"] = _quiet(options["quiet"])
        slugs = [t for t in options["teams"].split(",") if t] if options["teams"] is not None else None
        by = User.objects.filter(username=options["by"]).first() if options["by"] else None
        if options["by"] and by is None:
            raise CommandError(f"--by: no user named {options['by']!r}")
        try:
            policy = policy_save(name=options["name"], cluster=options["cluster"], teams=slugs, by=by, **fields)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.stdout.write(f"{policy.name}: {policy.cluster.name} {policy.mode} {policy.condition}")
