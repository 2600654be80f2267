from django.urls import include, path
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from governance.costs.api import ChargebackView
from governance.efficiency.api import FindingListView, FindingStateView
from governance.usage.api import IngestView

app_name = "v1"


@api_view(["GET"])
@permission_classes([AllowAny])
def api_root(request: Request, format: str | None = None) -> Response:
    """The API's entry point: version and where each resource lives."""
    return Response(
        {
            "version": "v1",
            "ingest": reverse("v1:ingest", request=request),
            "chargeback": reverse("v1:chargeback", request=request),
            "schema": reverse("schema", request=request),
        }
    )


urlpatterns = [
    path("", api_root, name="root"),
    path("ingest/", IngestView.as_view(), name="ingest"),
    path("chargeback/", ChargebackView.as_view(), name="chargeback"),
    path("findings/", FindingListView.as_view(), name="findings"),
    path("findings/<int:pk>/state/", FindingStateView.as_view(), name="finding-state"),
    path("", include("governance.costs.api_urls")),
]
