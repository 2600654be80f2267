"""Every endpoint and page, for every role: allowed or denied, and never another team's rows.

To add an endpoint (costs, findings...), add a Row to ROWS: the route name, the method, a URL built
from the `world` fixture, and the status each role gets; list endpoints that hold team data also
get a Leak row. `test_the_matrix_covers_every_route` fails until every named route has a row.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.api.conftest import NLP_MARKERS, UNATTRIBUTED_MARKERS, VISION_MARKERS

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "admin", "finance", "nlp_lead", "alice", "vision_lead"]
SIGNED_IN = ROLES[1:]
V1 = "/api/v1"


def everyone(status: int, anonymous: int = 401) -> dict[str, int]:
    return {"anonymous": anonymous, **dict.fromkeys(SIGNED_IN, status)}


def admins(status: int, others: int = 403, anonymous: int = 401) -> dict[str, int]:
    return {**everyone(others, anonymous), "admin": status}


def seen_by(status: int, *roles: str, others: int = 404) -> dict[str, int]:
    """A row of one team: admin and finance see it, and the roles named; the rest get 404."""
    return {**everyone(others), **dict.fromkeys(("admin", "finance", *roles), status)}


def page_seen_by(status: int, *roles: str, others: int = 404) -> dict[str, int]:
    """A page of one team's data: like seen_by, and the anonymous visitor is sent to the login page."""
    return {**seen_by(status, *roles, others=others), "anonymous": 302}


NLP = ("nlp_lead", "alice")
PAGE = everyone(200, anonymous=302)
# Costs: admin and finance everything, close months and export; anyone else gets 403 on those.
FINANCE = {**admins(201), "finance": 201}
# Finance's pages: anyone else is sent to their own team's month, or refused a post.
FINANCE_PAGE = {**everyone(302, anonymous=302), "admin": 200, "finance": 200}
FINANCE_POST_PAGE = {**everyone(403, anonymous=302), "admin": 302, "finance": 302}


@dataclass(frozen=True)
class Row:
    route: str
    method: str
    url: Callable
    expect: dict[str, int]
    data: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        scope = f" {self.data['scope']}" if "scope" in self.data else ""
        return f"{self.method} {self.route}{scope}"


def remediation_case(w):
    """A dry-run policy covering nlp on c1, and its case against bob's job (nlp)."""
    from governance.remediation.models import Remediation, RemediationPolicy

    policy, _ = RemediationPolicy.objects.get_or_create(
        name="m-idle", defaults={"cluster": w.job_bob.cluster, "mode": "dry_run"}
    )
    policy.teams.add(w.job_bob.project.team)
    case, _ = Remediation.objects.get_or_create(
        policy=policy,
        job=w.job_bob,
        defaults={"dry_run": True, "stage": "warned_once", "opened_at": w.job_bob.start_time},
    )
    return case


COMMITMENT = {"team": "nlp", "cluster": "c1", "gpu_model": "NVIDIA A100-SXM4-80GB", "gpus": 4,
              "price_per_gpu_hour": "2.50", "end": "2027-01-01T00:00:00Z"}  # fmt: skip


# fmt: off
ROWS = [
    # API root, schema and docs are public: they describe the API, they hold no data.
    Row("v1:root", "get", lambda w: f"{V1}/", everyone(200, anonymous=200)),
    Row("schema", "get", lambda w: "/api/schema/", everyone(200, anonymous=200)),
    Row("api-docs", "get", lambda w: "/api/docs/", everyone(200, anonymous=200)),
    # Ingest takes an ingest token only; no session may ingest.
    Row("v1:ingest", "post", lambda w: f"{V1}/ingest/", everyone(403)),
    # A node's topology, like a batch: an ingest token's, never a session's.
    Row("v1:topology", "post", lambda w: f"{V1}/topology/", everyone(403)),
    # Dead-letter batches: admins only.
    Row("v1:ingest-dead", "get", lambda w: f"{V1}/ingest/dead/", admins(200)),
    Row("v1:chargeback", "get", lambda w: f"{V1}/chargeback/?month=2026-11", everyone(200)),
    # The FOCUS CSV has one row per job per day: leads (their team), finance and admins; engineers see totals only.
    Row(
        "v1:chargeback",
        "get",
        lambda w: f"{V1}/chargeback/?month=2026-11&format=csv",
        {**everyone(200), "alice": 403},
    ),
    Row(
        "v1:chargeback",
        "get",
        lambda w: f"{V1}/chargeback/?month=2026-11&team=vision&format=csv",
        {**everyone(403), "admin": 200, "finance": 200, "vision_lead": 200},
    ),
    # Closing a month: finance and admins; a closed month (October) stays closed.
    Row("v1:month-close", "post", lambda w: f"{V1}/months/2026-09/close/", FINANCE),
    Row("v1:month-close", "post", lambda w: f"{V1}/months/2026-10/close/", {**FINANCE, "admin": 409, "finance": 409}),
    # Rate cards and declared capacity are the price list of shared infrastructure: all read, admins set.
    Row("v1:rates-list", "get", lambda w: f"{V1}/rates/", everyone(200)),
    Row(
        "v1:rates-list",
        "post",
        lambda w: f"{V1}/rates/",
        admins(201),
        {"gpu_model": "NVIDIA A100", "price_per_gpu_hour": "1.50", "valid_from": "2026-12-01T00:00:00Z"},
    ),
    Row("v1:capacity-list", "get", lambda w: f"{V1}/capacity/", everyone(200)),
    Row(
        "v1:capacity-list",
        "post",
        lambda w: f"{V1}/capacity/",
        admins(201),
        {"cluster": "c1", "gpu_model": "NVIDIA A100", "count": 8, "valid_from": "2026-12-01T00:00:00Z"},
    ),
    # Unallocated policies are effective-dated terms like rates: all read, admins set (never into a closed month).
    Row("v1:policies-list", "get", lambda w: f"{V1}/policies/", everyone(200)),
    Row(
        "v1:policies-list",
        "post",
        lambda w: f"{V1}/policies/",
        admins(201),
        {"cluster": "c1", "policy": "share", "valid_from": "2026-12-01T00:00:00Z"},
    ),
    Row(
        "v1:policies-list",
        "post",
        lambda w: f"{V1}/policies/",
        {**admins(400), "admin": 400},
        {"cluster": "c1", "policy": "share", "valid_from": "2026-10-15T00:00:00Z"},
    ),
    # Showback and grid intensity are effective-dated cluster terms like policies: all read, admins set.
    Row("v1:billing-modes-list", "get", lambda w: f"{V1}/billing-modes/", everyone(200)),
    Row(
        "v1:billing-modes-list",
        "post",
        lambda w: f"{V1}/billing-modes/",
        admins(201),
        {"cluster": "c1", "mode": "showback", "valid_from": "2026-12-01T00:00:00Z"},
    ),
    Row(
        "v1:billing-modes-list",
        "post",
        lambda w: f"{V1}/billing-modes/",
        {**admins(400), "admin": 400},
        {"cluster": "c1", "mode": "showback", "valid_from": "2026-10-15T00:00:00Z"},
    ),
    Row("v1:grid-intensity-list", "get", lambda w: f"{V1}/grid-intensity/", everyone(200)),
    Row(
        "v1:grid-intensity-list",
        "post",
        lambda w: f"{V1}/grid-intensity/",
        admins(201),
        {"cluster": "c1", "kg_co2e_per_kwh": "0.38", "valid_from": "2026-12-01T00:00:00Z"},
    ),
    # Commitments: admins set them; their team's (engineers an empty list).
    Row("v1:commitments-list", "get", lambda w: f"{V1}/commitments/", everyone(200)),
    Row(
        "v1:commitments-list",
        "post",
        lambda w: f"{V1}/commitments/",
        admins(201),
        {**COMMITMENT, "start": "2026-12-01T00:00:00Z"},
    ),
    Row(
        "v1:commitments-list",
        "post",
        lambda w: f"{V1}/commitments/",
        {**admins(400), "admin": 400},
        {**COMMITMENT, "start": "2026-10-15T00:00:00Z"},
    ),
    # Forecasts, footprint and anomalies: every signed-in user, each seeing only the teams they may see.
    Row("v1:forecast", "get", lambda w: f"{V1}/forecast/?month=2026-11", everyone(200)),
    Row("v1:footprint", "get", lambda w: f"{V1}/footprint/?month=2026-11", everyone(200)),
    Row("v1:anomalies-list", "get", lambda w: f"{V1}/anomalies/", everyone(200)),
    # Budgets: a lead sets their team's; finance and admins any team's.
    Row("v1:budgets-list", "get", lambda w: f"{V1}/budgets/", everyone(200)),
    Row(
        "v1:budgets-list",
        "post",
        lambda w: f"{V1}/budgets/",
        {**everyone(403), "admin": 201, "finance": 201, "nlp_lead": 201},
        {"team": "nlp", "month": "2026-12", "amount": "500.00"},
    ),
    # Findings: on the jobs you may see; bob's job is nlp's (alice may not see it), dave's vision's.
    Row("v1:findings", "get", lambda w: f"{V1}/findings/", everyone(200)),
    Row("v1:finding-realised", "get", lambda w: f"{V1}/findings/{w.finding_bob.pk}/realised/",
        seen_by(200, "nlp_lead")),
    Row("v1:finding-workload", "get", lambda w: f"{V1}/findings/{w.finding_bob.pk}/workload/",
        seen_by(200, "nlp_lead")),
    # A team's advice taken: its leads (the findings' detail); the migration check: whoever sees the team's totals.
    Row("v1:team-advice-taken", "get", lambda w: f"{V1}/teams/nlp/advice-taken/?month=2026-11",
        seen_by(200, "nlp_lead")),
    Row("v1:project-migration", "get", lambda w: f"{V1}/projects/llm-pretrain/migration/", seen_by(200, *NLP)),
    Row("v1:project-migration", "get", lambda w: f"{V1}/projects/detector/migration/?days=30",
        seen_by(200, "vision_lead")),
    Row(
        "v1:finding-state",
        "post",
        lambda w: f"{V1}/findings/{w.finding_bob.pk}/state/",
        seen_by(200, "nlp_lead"),
        {"state": "acknowledged"},
    ),
    Row(
        "v1:finding-state",
        "post",
        lambda w: f"{V1}/findings/{w.finding_dave.pk}/state/",
        seen_by(200, "vision_lead"),
        {"state": "dismissed", "reason": "a benchmark"},
    ),
    # Teams and their reference data: read as the selectors allow, written by admins.
    Row("v1:team-list", "get", lambda w: f"{V1}/teams/", everyone(200)),
    Row("v1:team-list", "post", lambda w: f"{V1}/teams/", admins(201), {"slug": "audio", "name": "Audio"}),
    Row("v1:team-detail", "get", lambda w: f"{V1}/teams/{w.nlp.pk}/", seen_by(200, *NLP)),
    Row("v1:team-detail", "get", lambda w: f"{V1}/teams/{w.vision.pk}/", seen_by(200, "vision_lead")),
    Row("v1:team-detail", "patch", lambda w: f"{V1}/teams/{w.nlp.pk}/", admins(200), {"name": "Language"}),
    Row("v1:team-detail", "delete", lambda w: f"{V1}/teams/{w.vision.pk}/", admins(409)),
    Row("v1:project-list", "get", lambda w: f"{V1}/projects/", everyone(200)),
    Row(
        "v1:project-list",
        "post",
        lambda w: f"{V1}/projects/",
        admins(201),
        {"slug": "asr", "name": "ASR", "team": "nlp"},
    ),
    Row("v1:project-detail", "get", lambda w: f"{V1}/projects/{w.vision_project.pk}/", seen_by(200, "vision_lead")),
    Row("v1:project-detail", "delete", lambda w: f"{V1}/projects/{w.nlp_project.pk}/", admins(409)),
    Row("v1:membership-list", "get", lambda w: f"{V1}/memberships/", everyone(200)),
    Row(
        "v1:membership-list",
        "post",
        lambda w: f"{V1}/memberships/",
        admins(201),
        {"user": "finance", "team": "vision", "role": "engineer"},
    ),
    Row("v1:membership-detail", "get", lambda w: f"{V1}/memberships/{w.alice_membership.pk}/", seen_by(200, *NLP)),
    Row("v1:membership-detail", "delete", lambda w: f"{V1}/memberships/{w.vision_membership.pk}/", admins(204)),
    Row("v1:project-mapping-list", "get", lambda w: f"{V1}/project-mappings/", everyone(200)),
    Row(
        "v1:project-mapping-list",
        "post",
        lambda w: f"{V1}/project-mappings/",
        admins(201),
        {"kind": "k8s_namespace", "value": "ns-asr", "project": "llm-pretrain"},
    ),
    Row(
        "v1:project-mapping-detail",
        "get",
        lambda w: f"{V1}/project-mappings/{w.vision_mapping.pk}/",
        seen_by(200, "vision_lead"),
    ),
    Row(
        "v1:project-mapping-detail",
        "put",
        lambda w: f"{V1}/project-mappings/{w.nlp_mapping.pk}/",
        admins(200),
        {"kind": "slurm_account", "value": "acct-nlp2", "cluster_name": "", "project": "llm-pretrain"},
    ),
    # The fleet is shared infrastructure: everyone reads it, admins set cluster policy.
    Row("v1:cluster-list", "get", lambda w: f"{V1}/clusters/", everyone(200)),
    Row("v1:cluster-detail", "get", lambda w: f"{V1}/clusters/{w.cluster.pk}/", everyone(200)),
    Row(
        "v1:cluster-detail",
        "patch",
        lambda w: f"{V1}/clusters/{w.cluster.pk}/",
        admins(200),
        {"unallocated_policy": "share"},
    ),
    Row("v1:cluster-utilisation", "get", lambda w: f"{V1}/clusters/{w.cluster.pk}/utilisation/", everyone(200)),
    Row("v1:node-list", "get", lambda w: f"{V1}/nodes/", everyone(200)),
    Row("v1:node-list", "post", lambda w: f"{V1}/nodes/", everyone(405), {"name": "x"}),
    Row("v1:node-detail", "get", lambda w: f"{V1}/nodes/{w.node.pk}/", everyone(200)),
    Row("v1:gpu-list", "get", lambda w: f"{V1}/gpus/", everyone(200)),
    Row("v1:gpu-detail", "get", lambda w: f"{V1}/gpus/{w.gpu.pk}/", everyone(200)),
    Row("v1:gpu-detail", "delete", lambda w: f"{V1}/gpus/{w.gpu.pk}/", everyone(405)),
    Row("v1:gpu-confirm", "post", lambda w: f"{V1}/gpus/{w.gpu.pk}/confirm/", admins(200)),
    Row("v1:overclaims-list", "get", lambda w: f"{V1}/overclaims/", admins(200)),
    # Jobs: admins and finance all, leads their team's, engineers their own.
    Row("v1:job-list", "get", lambda w: f"{V1}/jobs/", everyone(200)),
    Row("v1:job-detail", "get", lambda w: f"{V1}/jobs/{w.job_alice.pk}/", seen_by(200, *NLP)),
    Row("v1:job-detail", "get", lambda w: f"{V1}/jobs/{w.job_bob.pk}/", seen_by(200, "nlp_lead")),
    Row("v1:job-detail", "get", lambda w: f"{V1}/jobs/{w.job_dave.pk}/", seen_by(200, "vision_lead")),
    Row("v1:job-detail", "get", lambda w: f"{V1}/jobs/{w.job_zed.pk}/", seen_by(200)),
    Row("v1:job-usage", "get", lambda w: f"{V1}/jobs/{w.job_bob.pk}/usage/?resolution=day", seen_by(200, "nlp_lead")),
    Row("v1:job-usage", "get", lambda w: f"{V1}/jobs/{w.job_dave.pk}/usage/", seen_by(200, "vision_lead")),
    Row("v1:job-history", "get", lambda w: f"{V1}/jobs/{w.job_bob.pk}/history/", seen_by(200, "nlp_lead")),
    Row("v1:job-history", "get", lambda w: f"{V1}/jobs/{w.job_dave.pk}/history/", seen_by(200, "vision_lead")),
    # Tokens: your own (admins: everyone's); the audit log: admins only.
    Row("v1:token-list", "get", lambda w: f"{V1}/tokens/", everyone(200)),
    # Minting: anyone signed in gets read and write tokens; ingest and admin tokens are for platform admins only
    # (a 400 naming the scope field).
    Row("v1:token-list", "post", lambda w: f"{V1}/tokens/", everyone(201), {"name": "new", "scope": "read"}),
    Row("v1:token-list", "post", lambda w: f"{V1}/tokens/", everyone(201), {"name": "new", "scope": "write"}),
    *(
        Row("v1:token-list", "post", lambda w: f"{V1}/tokens/", admins(201, others=400), {"name": "new", "scope": s})
        for s in ("ingest", "admin")
    ),
    Row(
        "v1:token-detail",
        "get",
        lambda w: f"{V1}/tokens/{w.alice_token.pk}/",
        {**everyone(404), "admin": 200, "alice": 200},
    ),
    Row(
        "v1:token-detail",
        "delete",
        lambda w: f"{V1}/tokens/{w.vision_token.pk}/",
        {**everyone(404), "admin": 204, "vision_lead": 204},
    ),
    Row("v1:audit-list", "get", lambda w: f"{V1}/audit/", admins(200)),
    Row("v1:audit-detail", "get", lambda w: f"{V1}/audit/{w.audit.pk}/", admins(200)),
    Row("v1:audit-csv", "get", lambda w: f"{V1}/audit/csv/", admins(200)),
    Row("dashboard:audit", "get", lambda w: "/audit/", admins(200, anonymous=302)),
    Row("dashboard:audit-csv", "get", lambda w: "/audit/audit.csv", admins(200, anonymous=302)),
    # The notification outbox: admins only.
    Row("v1:notification-list", "get", lambda w: f"{V1}/notifications/", admins(200)),
    Row("v1:notification-detail", "get", lambda w: f"{V1}/notifications/{w.notification.pk}/", admins(200)),
    Row("v1:pricing-failures-list", "get", lambda w: f"{V1}/pricing-failures/", admins(200)),
    # Remediation: admins write policies; leads read those covering their teams and the cases of their teams' jobs.
    Row("v1:remediation-policy-list", "get", lambda w: f"{V1}/remediation-policies/", everyone(200)),
    Row("v1:remediation-policy-list", "post", lambda w: f"{V1}/remediation-policies/", admins(201),
        data={"name": "m-new", "cluster": "c1", "mode": "dry_run"}),
    Row("v1:remediation-policy-detail", "get",
        lambda w: f"{V1}/remediation-policies/{remediation_case(w).policy_id}/", seen_by(200, "nlp_lead")),
    Row("v1:remediation-list", "get", lambda w: f"{V1}/remediations/", everyone(200)),
    Row("v1:remediation-detail", "get", lambda w: f"{V1}/remediations/{remediation_case(w).pk}/",
        seen_by(200, "nlp_lead")),
    Row("v1:remediation-dry-run", "get", lambda w: f"{V1}/remediation/dry-run/", everyone(200)),
    Row("v1:remediation-check", "post", lambda w: f"{V1}/remediation/check/", admins(200)),
    Row("dashboard:remediation", "get", lambda w: "/remediation/",
        {**page_seen_by(200, "nlp_lead", "vision_lead"), "alice": 404}),
    # Pages.
    Row("dashboard:overview", "get", lambda w: "/?month=2026-11", PAGE),
    Row("dashboard:chargeback-csv", "get", lambda w: "/chargeback.csv?month=2026-11", PAGE),
    Row("dashboard:heatmap", "get", lambda w: "/cluster/", PAGE),
    Row("favicon", "get", lambda w: "/favicon.ico", everyone(302, anonymous=302)),  # to the static icon, for anyone
    Row("metrics", "get", lambda w: "/metrics", everyone(404, anonymous=404)),  # off until METRICS_TOKEN is set
    # Costs pages: finance's month for finance and admins; anyone else is sent to their own team's month.
    Row("costs:month", "get", lambda w: "/costs/?month=2026-11", FINANCE_PAGE),
    # What no team was billed (the mapping worklist): finance and admins only, as a page and in the API.
    Row("costs:unattributed", "get", lambda w: "/costs/unattributed/?month=2026-11",
        {**everyone(403, anonymous=302), "admin": 200, "finance": 200}),
    Row("v1:unattributed", "get", lambda w: f"{V1}/unattributed/?month=2026-11",
        {**everyone(403), "admin": 200, "finance": 200}),
    Row("costs:team", "get", lambda w: "/costs/team/nlp/?month=2026-11", page_seen_by(200, *NLP)),
    Row("costs:team", "get", lambda w: "/costs/team/vision/?month=2026-11", page_seen_by(200, "vision_lead")),
    Row("costs:team-csv", "get", lambda w: "/costs/team/nlp/chargeback.csv?month=2026-11", page_seen_by(200, *NLP[:1])),
    Row(
        "costs:team-csv",
        "get",
        lambda w: "/costs/team/vision/chargeback.csv?month=2026-11",
        page_seen_by(200, "vision_lead"),
    ),
    Row("costs:close", "post", lambda w: "/costs/close/2026-09/", FINANCE_POST_PAGE),
    # Asking for a budget: the team's lead only (finance and admins set one instead).
    Row("costs:budget-request", "post", lambda w: "/costs/team/nlp/budget-request/?month=2026-11",
        {**page_seen_by(302, "nlp_lead"), "admin": 403, "finance": 403}),
    Row("costs:close", "get", lambda w: "/costs/close/2026-09/", {**everyone(403, anonymous=302), "admin": 200,
                                                                  "finance": 200}),
    Row("costs:team-table", "get", lambda w: "/costs/team/nlp/users.csv?month=2026-11", page_seen_by(200, "nlp_lead")),
    Row("costs:team-table", "get", lambda w: "/costs/team/vision/top-cost.csv?month=2026-11",
        page_seen_by(200, "vision_lead")),
    Row("dashboard:me", "get", lambda w: "/me/?month=2026-11", PAGE),
    Row("dashboard:job-search", "get", lambda w: "/jobs/?q=no-such-job", PAGE),
    Row("v1:me-month", "get", lambda w: f"{V1}/me/month/?month=2026-11", everyone(200)),
    Row("efficiency:findings-bulk", "post", lambda w: "/findings/bulk/", everyone(302, anonymous=302),
        {"ids": "1", "state": "acknowledged"}),
    # Efficiency pages: a job and its findings as the job's visibility allows; the fleet for everyone.
    Row("efficiency:job", "get", lambda w: f"/jobs/{w.job_alice.pk}/", page_seen_by(200, *NLP)),
    Row("efficiency:migration", "get", lambda w: "/projects/llm-pretrain/migration/", page_seen_by(200, *NLP)),
    Row("efficiency:migration-csv", "get", lambda w: "/projects/detector/migration.csv",
        page_seen_by(200, "vision_lead")),
    Row("efficiency:job", "get", lambda w: f"/jobs/{w.job_bob.pk}/", page_seen_by(200, "nlp_lead")),
    Row("efficiency:job", "get", lambda w: f"/jobs/{w.job_dave.pk}/", page_seen_by(200, "vision_lead")),
    Row("efficiency:job", "get", lambda w: f"/jobs/{w.job_zed.pk}/", page_seen_by(200)),
    Row("efficiency:findings", "get", lambda w: "/findings/", PAGE),
    Row(
        "efficiency:finding-state",
        "post",
        lambda w: f"/findings/{w.finding_bob.pk}/state/",
        page_seen_by(302, "nlp_lead"),
        {"state": "acknowledged"},
    ),
    Row("efficiency:cluster", "get", lambda w: f"/clusters/{w.cluster.name}/", PAGE),
    Row("login", "get", lambda w: "/accounts/login/", everyone(200, anonymous=200)),
    Row("logout", "post", lambda w: "/accounts/logout/", everyone(302, anonymous=302)),
    Row("password_change", "get", lambda w: "/accounts/password/", PAGE),
    Row("password_change_done", "get", lambda w: "/accounts/password/done/", PAGE),
    Row("admin:index", "get", lambda w: "/admin/", {**everyone(302, anonymous=302), "admin": 200}),
]
# fmt: on


@dataclass(frozen=True)
class Leak:
    """A list or export that holds team data, and what each role must and must never find in it."""

    name: str
    url: Callable  # "{team}" in the URL becomes the viewer's own team
    must_show: dict[str, list[str]]
    roles: tuple[str, ...] = ("nlp_lead", "alice", "vision_lead")
    never: dict[str, list[str]] = field(default_factory=dict)  # markers this list alone could leak


OWN_TEAM_ONLY = {"nlp_lead": VISION_MARKERS + UNATTRIBUTED_MARKERS, "alice": VISION_MARKERS + UNATTRIBUTED_MARKERS}
OWN_TEAM_ONLY["vision_lead"] = NLP_MARKERS + UNATTRIBUTED_MARKERS

LEADS = ("nlp_lead", "vision_lead")
OWN_TEAM = {"nlp_lead": "nlp", "alice": "nlp", "vision_lead": "vision"}

# fmt: off
LEAKS = [
    Leak("teams", lambda w: f"{V1}/teams/", {"nlp_lead": ['"nlp"'], "alice": ['"nlp"'], "vision_lead": ['"vision"']}),
    Leak("projects", lambda w: f"{V1}/projects/", {"nlp_lead": ["llm-pretrain"], "vision_lead": ["detector"]}),
    Leak(
        "memberships", lambda w: f"{V1}/memberships/", {"alice": ["alice", "nlp-lead"], "vision_lead": ["vision-lead"]}
    ),
    Leak("mappings", lambda w: f"{V1}/project-mappings/", {"nlp_lead": ["acct-nlp"], "vision_lead": ["acct-vision"]}),
    Leak("jobs", lambda w: f"{V1}/jobs/", {"nlp_lead": ["alice", "bob"], "alice": ["alice"], "vision_lead": ["dave"]}),
    Leak("chargeback", lambda w: f"{V1}/chargeback/?month=2026-11", {"alice": ["NLP"], "vision_lead": ["Vision"]}),
    Leak(
        "chargeback csv",
        lambda w: f"{V1}/chargeback/?month=2026-11&format=csv",
        {"nlp_lead": ["NLP", "bob"], "vision_lead": ["Vision", "dave"]},
        roles=LEADS,
    ),
    Leak("budgets", lambda w: f"{V1}/budgets/", {"nlp_lead": ['"nlp"'], "vision_lead": ['"vision"']}, roles=LEADS),
    # Serialized findings name the job's team (null when unattributed), not its people.
    Leak(
        "findings",
        lambda w: f"{V1}/findings/",
        {"nlp_lead": ['"team":"nlp"'], "vision_lead": ['"team":"vision"']},
        never={"nlp_lead": ['"team":null'], "alice": ['"team":"nlp"', '"team":null'], "vision_lead": ['"team":null']},
    ),
    Leak("findings page", lambda w: "/findings/", {"nlp_lead": ["bob", "idle_gpu"], "vision_lead": ["dave"]}),
    Leak("team month", lambda w: "/costs/team/{team}/?month=2026-11", {"nlp_lead": ["NLP"], "vision_lead": ["Vision"]}),
    Leak(
        "team month csv",
        lambda w: "/costs/team/{team}/chargeback.csv?month=2026-11",
        {"nlp_lead": ["NLP", "alice", "bob"], "vision_lead": ["Vision", "dave"]},
        roles=LEADS,
    ),
    Leak(
        "team tables csv",
        lambda w: "/costs/team/{team}/users.csv?month=2026-11",
        {"nlp_lead": ["alice", "bob"], "vision_lead": ["dave"]},
        roles=LEADS,
    ),
    Leak("my month", lambda w: f"{V1}/me/month/?month=2026-11", {"alice": ['"team":"NLP"']}, roles=("alice",),
         never={"alice": ['"team":"Vision"', "bob"]}),
    Leak("my jobs", lambda w: "/me/?month=2026-11", {"alice": ["alice"]}, roles=("alice",), never={"alice": ["bob"]}),
    Leak("page csv", lambda w: "/chargeback.csv?month=2026-11", {"alice": ["NLP"], "vision_lead": ["Vision"]}),
    Leak("overview", lambda w: "/?month=2026-11", {"nlp_lead": ["NLP"], "vision_lead": ["Vision"]}),
    Leak("tokens", lambda w: f"{V1}/tokens/", {"alice": ["alice-laptop"], "vision_lead": ["vision-ci"]}),
]
# fmt: on
# An engineer sees the team's totals but not a teammate's jobs.
ENGINEER_NEVER = {"jobs": ["bob"], "tokens": ["vision-ci"], "findings page": ["bob"], "team month": ["bob"]}


def client_for(client, world, role: str):
    if role != "anonymous":
        client.force_login(getattr(world.cast, role))
    return client


def body_of(response) -> str:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode()


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_each_role_gets_the_status_the_matrix_says(client, world, row: Row, role: str):
    client = client_for(client, world, role)
    call = getattr(client, row.method)
    kwargs = {"data": json.dumps(row.data), "content_type": "application/json"} if row.method != "get" else {}

    response = call(row.url(world), **kwargs)

    assert response.status_code == row.expect[role], body_of(response)[:500]
    if response.status_code >= 400 and row.route.startswith("v1:"):
        assert set(response.json()["error"]) == {"code", "message", "details"}


LEAK_CASES = [(leak, role) for leak in LEAKS for role in leak.roles]


@pytest.mark.parametrize(("leak", "role"), LEAK_CASES, ids=[f"{leak.name}-{role}" for leak, role in LEAK_CASES])
def test_lists_and_exports_never_include_another_teams_rows(client, world, leak: Leak, role: str):
    response = client_for(client, world, role).get(leak.url(world).replace("{team}", OWN_TEAM[role]))

    body = body_of(response)
    assert response.status_code == 200
    for marker in leak.must_show.get(role, []):
        assert marker in body, f"{role} should see {marker} in {leak.name}"
    never = OWN_TEAM_ONLY[role] + (ENGINEER_NEVER.get(leak.name, []) if role == "alice" else [])
    if role in ("nlp_lead", "alice"):
        never = [m for m in never if m not in leak.must_show.get(role, [])]
    never += leak.never.get(role, [])
    for marker in never:
        assert marker not in body, f"{role} sees {marker} in {leak.name}"


def test_admin_and_finance_see_every_team_in_the_chargeback(client, world):
    for role in ("admin", "finance"):
        body = body_of(client_for(client, world, role).get(f"{V1}/chargeback/?month=2026-11&format=csv"))
        rows = list(csv.DictReader(io.StringIO(body)))
        assert {"NLP", "Vision"} <= {row["SubAccountName"] for row in rows}, role
        # Usage billed to no team has no sub account (FOCUS: no SubAccountName without a SubAccountId).
        assert any(not r["SubAccountId"] and "zebulon" in r["Tags"] for r in rows), role


def _route_names(resolver: URLResolver, namespace: str = "") -> set[str]:
    names = set()
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace == "admin":
                names.add("admin:index")
                continue
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            names |= _route_names(pattern, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            names.add(f"{namespace}{pattern.name}")
    return names


def test_the_matrix_covers_every_route():
    routes = {name for name in _route_names(get_resolver()) if not name.startswith("django.contrib")}
    covered = {row.route for row in ROWS}

    assert routes - covered == set(), "add rows to ROWS for these routes"
