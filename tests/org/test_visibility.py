import pytest

from governance.org.selectors import (
    can_see_team,
    can_see_team_detail,
    job_visibility_filter,
    team_totals_filter,
    teams_visible,
)
from governance.usage.models import Job
from tests.factories import ingest, job_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(cast):
    ingest([
        job_record(job_id="1", user="alice", project="llm-pretrain", team="nlp"),
        job_record(job_id="2", user="bob", project="llm-pretrain", team="nlp"),
        job_record(job_id="3", user="dave", project="detector", team="vision"),
        job_record(job_id="4", user="zed", project="nobody-knows", team=None),
    ])  # fmt: skip


def visible_jobs(user) -> set[str]:
    return set(Job.objects.filter(job_visibility_filter(user=user)).values_list("external_id", flat=True))


def test_admin_and_finance_see_every_team_and_job(cast, jobs):
    for user in (cast.admin, cast.finance):
        assert set(teams_visible(user=user).values_list("slug", flat=True)) == {"nlp", "vision"}
        assert visible_jobs(user) == {"1", "2", "3", "4"}


def test_a_lead_sees_only_their_team(cast, jobs):
    assert list(teams_visible(user=cast.nlp_lead).values_list("slug", flat=True)) == ["nlp"]
    assert visible_jobs(cast.nlp_lead) == {"1", "2"}
    assert can_see_team_detail(user=cast.nlp_lead, team=cast.nlp)
    assert not can_see_team(user=cast.nlp_lead, team=cast.vision)


def test_an_engineer_sees_own_jobs_and_team_totals_but_not_team_detail(cast, jobs):
    assert visible_jobs(cast.alice) == {"1"}
    assert can_see_team(user=cast.alice, team=cast.nlp)
    assert not can_see_team_detail(user=cast.alice, team=cast.nlp)


def test_a_user_of_another_team_sees_nothing_of_it(cast, jobs):
    assert visible_jobs(cast.vision_lead) == {"3"}
    assert not can_see_team(user=cast.vision_lead, team=cast.nlp)


def test_team_totals_cover_the_whole_team_for_an_engineer_and_everything_for_finance(cast, jobs):
    def totals(user) -> set[str]:
        return set(Job.objects.filter(team_totals_filter(user=user)).values_list("external_id", flat=True))

    assert totals(cast.alice) == {"1", "2"}
    assert totals(cast.vision_lead) == {"3"}
    assert totals(cast.finance) == {"1", "2", "3", "4"}
