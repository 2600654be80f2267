from collections.abc import Callable, Iterable

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils.text import slugify

from governance.lib.enqueue import enqueue_on_commit
from governance.org.models import Project, ProjectMapping, Team


def project_resolve(*, account: str, team: str | None, cluster: str, create: bool = False) -> Project | None:
    """The project a scheduler account names: an explicit mapping first, then a project of that slug.

    With `create` (an operator's `import_usage`, never the ingest API), a record that names its team as well
    as its project creates the pair when neither exists yet. Otherwise, and for an account with no mapping
    and no team, it stays unattributed rather than guessed.
    """
    mapping = (
        ProjectMapping.objects.filter(value=account)
        .filter(Q(cluster_name=cluster) | Q(cluster_name=""))
        .select_related("project")
        .order_by("-cluster_name")
        .first()
    )
    if mapping is not None:
        return mapping.project
    slug = slugify(account)[:64]
    project = Project.objects.filter(slug=slug).first()
    if project is not None or not create or not team or not slug:
        return project
    team_slug = slugify(team)[:64]
    if not team_slug:
        return None
    try:
        with transaction.atomic():
            team_obj, _ = Team.objects.get_or_create(slug=team_slug, defaults={"name": team})
            return Project.objects.get_or_create(slug=slug, defaults={"team": team_obj, "name": account})[0]
    except IntegrityError:  # another worker created it first, or another team already has that name
        return Project.objects.filter(slug=slug).first()


def project_ids_resolver(*, create: bool = False) -> Callable[[str, str | None, str], int | None]:
    """`project_resolve` as a project id (or None), remembered per (account, team, cluster): for one pass
    over many jobs, which name the same few accounts."""
    memo: dict[tuple[str, str | None, str], int | None] = {}

    def resolve(account: str, team: str | None, cluster: str) -> int | None:
        key = (account, team, cluster)
        if key not in memo:
            project = project_resolve(account=account, team=team, cluster=cluster, create=create)
            memo[key] = project.pk if project else None
        return memo[key]

    return resolve


REMAP_TASK = "usage.remap_jobs"


def jobs_remap_on_commit(*, accounts: Iterable[str]) -> None:
    """Once the current transaction commits (a mapping saved or deleted), remap the jobs naming `accounts`.

    Enqueued by task name: org sits below usage on the data path and does not import it. A broker that is down
    leaves the mapping saved; remapping then runs with the next change or by hand.
    """
    enqueue_on_commit(REMAP_TASK, sorted(set(accounts)))
