from django.db.models import QuerySet

from governance.api.models import ApiToken, AuditEntry
from governance.org.models import User


def tokens_visible(*, user: User) -> QuerySet[ApiToken]:
    """A user's own tokens; platform admins see everyone's (to revoke a leaked one)."""
    if not user.is_authenticated or not user.is_active:
        return ApiToken.objects.none()
    tokens = ApiToken.objects.select_related("user")
    return tokens if user.is_platform_admin else tokens.filter(user=user)


def audit_entries_visible(*, user: User) -> QuerySet[AuditEntry]:
    if not user.is_authenticated or not user.is_active or not user.is_platform_admin:
        return AuditEntry.objects.none()
    return AuditEntry.objects.all()
