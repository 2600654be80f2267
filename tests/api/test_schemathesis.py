"""Schemathesis against the live schema: generated requests, a read-scoped token, no 5xx, no schema violation."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from governance.api.services import api_token_create
from governance.remediation.models import Remediation, RemediationPolicy

pytestmark = pytest.mark.django_db

EXAMPLES_PER_OPERATION = 10
# Kept: no 5xx, documented status codes, content types and response bodies within the schema.
# Left out: "schema-valid data must be accepted", since some rules cannot be written in OpenAPI 3.0
# (start before end, no NUL character in a text filter) and a 400 naming the field is the right answer.
EXCLUDED = [positive_data_acceptance]


@pytest.fixture
def api_schema(world):
    # The real WSGI handler closes the connection around each request; the test's transaction lives on it.
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


def known_ids(world) -> dict[str, dict]:
    """Real objects for paths with parameters (by the path before the first one), so generated requests reach
    serializers and not only 404s."""
    ids = {
        "/api/v1/teams/": world.nlp.pk, "/api/v1/projects/": world.nlp_project.pk,
        "/api/v1/memberships/": world.alice_membership.pk, "/api/v1/project-mappings/": world.nlp_mapping.pk,
        "/api/v1/clusters/": world.cluster.pk, "/api/v1/nodes/": world.node.pk, "/api/v1/gpus/": world.gpu.pk,
        "/api/v1/jobs/": world.job_bob.pk, "/api/v1/tokens/": world.alice_token.pk, "/api/v1/audit/": world.audit.pk,
        "/api/v1/notifications/": world.notification.pk,
    }  # fmt: skip
    policy = RemediationPolicy.objects.create(name="fuzz-idle", cluster=world.cluster, mode="dry_run")
    policy.teams.add(world.nlp)
    case = Remediation.objects.create(policy=policy, job=world.job_bob, dry_run=True, stage="warned_once",
                                      opened_at=world.job_bob.start_time)  # fmt: skip
    ids |= {"/api/v1/remediation-policies/": policy.pk, "/api/v1/remediations/": case.pk}
    return {
        **{prefix: {"id": pk} for prefix, pk in ids.items()},
        "/api/v1/findings/": {"pk": world.finding_bob.pk},
        "/api/v1/months/": {"month": "2026-11"},
    }


def run_operation(operation, headers: dict[str, str], path_parameters: dict | None) -> None:
    strategy = operation.as_strategy(path_parameters=path_parameters) if path_parameters else operation.as_strategy()

    @given(case=strategy)
    @settings(
        max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    def check(case) -> None:
        case.call_and_validate(headers=headers, excluded_checks=EXCLUDED)

    check()


def test_the_api_answers_generated_requests_within_its_schema_and_without_5xx(api_schema, world, settings):
    # Schemathesis probes every operation with invalid credentials and wants 401: past the limit of a minute
    # those get 429 (tests/security/test_tokens_throttle_and_outage.py), while the valid token is still served.
    settings.API_TOKEN_FAILURES_PER_MINUTE = 100_000
    raw = api_token_create(user=world.cast.nlp_lead, name="fuzz", scope="read")[1]
    # Identity: responses are gzipped (GZipMiddleware) for a client that accepts it, and the WSGI transport
    # schemathesis calls through hands the bytes over undecoded.
    headers = {"Authorization": f"Bearer {raw}", "Accept-Encoding": "identity"}
    ids = known_ids(world)
    tested, failures = [], []

    for result in api_schema.get_all_operations():
        operation = result.ok()
        runs = [None]
        if "{" in operation.path:
            runs.append(ids[operation.path.split("{")[0]])
        for path_parameters in runs:
            try:
                run_operation(operation, headers, path_parameters)
            except (Exception, BaseExceptionGroup) as exc:  # collect every failing operation, not just the first
                failures.append(f"{operation.label} {path_parameters or ''}: {exc}")
        tested.append(operation.label)

    assert len(tested) >= 20
    assert failures == [], "\n\n".join(failures)
