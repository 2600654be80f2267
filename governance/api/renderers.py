from rest_framework.renderers import BaseRenderer


class CsvRenderer(BaseRenderer):
    """Lets `?format=csv` and `Accept: text/csv` through negotiation; the view streams the CSV itself."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return data if isinstance(data, bytes) else str(data).encode()
