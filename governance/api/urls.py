from django.urls import include, path, re_path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.routers import SimpleRouter

from governance.api import api as api_api
from governance.costs import api as costs_api
from governance.costs.api import ChargebackView
from governance.dashboard import api as dashboard_api
from governance.efficiency import api as efficiency_api
from governance.efficiency.api import FindingListView, FindingRealisedView, FindingStateView
from governance.fleet import api as fleet_api
from governance.notify import api as notify_api
from governance.org import api as org_api
from governance.remediation import api as remediation_api
from governance.remediation.api import CheckNowView, DryRunReportView
from governance.usage import api as usage_api
from governance.usage.api import IngestView

app_name = "v1"

# Each domain's api.py lists its viewsets as ROUTES = [(prefix, viewset, basename)] and any extra
# paths as URLS; to plug a domain in, add its module here.
DOMAINS = [
    org_api,
    fleet_api,
    usage_api,
    costs_api,
    api_api,
    notify_api,
    dashboard_api,
    efficiency_api,
    remediation_api,
]

router = SimpleRouter()
for domain in DOMAINS:
    for prefix, viewset, basename in getattr(domain, "ROUTES", []):
        router.register(prefix, viewset, basename=basename)


@extend_schema(responses={200: OpenApiTypes.OBJECT})
@api_view(["GET"])
@permission_classes([AllowAny])
def api_root(request: Request, format: str | None = None) -> Response:
    """The API's entry point: version and where each resource lives."""
    return Response(
        {
            "version": "v1",
            "ingest": reverse("v1:ingest", request=request),
            "chargeback": reverse("v1:chargeback", request=request),
            "findings": reverse("v1:findings", request=request),
            "schema": reverse("schema", request=request),
            **{prefix: reverse(f"v1:{basename}-list", request=request) for prefix, _, basename in router.registry},
        }
    )


urlpatterns = [
    path("", api_root, name="root"),
    path("ingest/", IngestView.as_view(), name="ingest"),
    path("chargeback/", ChargebackView.as_view(), name="chargeback"),
    path("findings/", FindingListView.as_view(), name="findings"),
    # Any id reaches the view, so an unknown one is a 404 in the API's error shape, not Django's HTML page.
    re_path(r"^findings/(?P<pk>-?\d+)/state/$", FindingStateView.as_view(), name="finding-state"),
    re_path(r"^findings/(?P<pk>-?\d+)/realised/$", FindingRealisedView.as_view(), name="finding-realised"),
    path("remediation/dry-run/", DryRunReportView.as_view(), name="remediation-dry-run"),
    path("remediation/check/", CheckNowView.as_view(), name="remediation-check"),
    path("", include("governance.costs.api_urls")),
    *(url for domain in DOMAINS for url in getattr(domain, "URLS", [])),
    *router.urls,
]
