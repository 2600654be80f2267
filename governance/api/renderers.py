from rest_framework import renderers
from rest_framework.renderers import BaseRenderer


class CsvRenderer(BaseRenderer):
    """Lets `?format=csv` and `Accept: text/csv` through negotiation; the view streams the CSV itself."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return data if isinstance(data, bytes) else str(data).encode()


class BrowsableAPIRenderer(renderers.BrowsableAPIRenderer):
    """DRF's HTML view of the API. A list that is computed rather than queried (the unattributed worklist: no
    queryset, no filter backend with a form) has no filter form, where DRF's would ask it for a queryset and fail
    (a 500)."""

    def get_filter_form(self, data, view, request):
        if not any(hasattr(backend, "to_html") for backend in getattr(view, "filter_backends", None) or ()):
            return None
        return super().get_filter_form(data, view, request)
