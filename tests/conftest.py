import os
import time

import pytest
import time_machine

from governance.celery import app as celery_app

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


_test_database: dict[str, object] = {}


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database; from here on every test is checked for rows it left (tests/leftovers.py)."""
    _test_database["blocker"] = django_db_blocker
    yield
    _test_database.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    blocker = _test_database.get("blocker")
    if blocker is not None:
        from tests.leftovers import check_left_behind

        with blocker.unblock():
            check_left_behind()
    return result


@pytest.fixture(autouse=True)
def _tasks_in_process(settings):
    """Tasks run in-process unless a test asks for the real worker (see tests/usage/test_worker.py)."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def cast(db):
    """The named cast shared by tests: two teams, and one user per role."""
    from governance.org.models import Membership, Project, Team, User

    nlp = Team.objects.create(slug="nlp", name="NLP")
    vision = Team.objects.create(slug="vision", name="Vision")
    Project.objects.create(team=nlp, slug="llm-pretrain", name="LLM pretraining")
    Project.objects.create(team=vision, slug="detector", name="Detector")
    users = {
        "admin": User.objects.create_user("admin", password="pw-admin-1234", role=User.Role.ADMIN, is_staff=True),
        "finance": User.objects.create_user("finance", password="pw-finance-1234", role=User.Role.FINANCE),
        "nlp_lead": User.objects.create_user("nlp-lead", password="pw-lead-1234"),
        "alice": User.objects.create_user("alice", password="pw-alice-1234"),
        "vision_lead": User.objects.create_user("vision-lead", password="pw-lead-1234"),
    }
    Membership.objects.create(user=users["nlp_lead"], team=nlp, role=Membership.Role.LEAD)
    Membership.objects.create(user=users["alice"], team=nlp, role=Membership.Role.ENGINEER)
    Membership.objects.create(user=users["vision_lead"], team=vision, role=Membership.Role.LEAD)
    return type("Cast", (), {"nlp": nlp, "vision": vision, **users})


@pytest.fixture
def ingest_token(cast):
    from governance.api.services import api_token_create

    return api_token_create(user=cast.admin, name="collector", scope="ingest", clusters=["c1", "c2", "east", "west"])[1]


@pytest.fixture
def read_token(cast):
    from governance.api.services import api_token_create

    return api_token_create(user=cast.admin, name="reader", scope="read")[1]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": "/usr/bin/chromium",
        "args": [
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync",
        ],
    }  # fmt: skip


@pytest.fixture
def one_window():
    """The clock stands still in the middle of the current minute for the test, so that a one-minute window (rate
    limits, invalid-token counts) cannot roll over between its requests and reset what they counted."""
    now = time.time()
    middle = now - now % 60 + 30
    with time_machine.travel(middle, tick=False):
        yield middle  # for another process to stand still at the same moment
