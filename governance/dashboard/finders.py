"""Serves plotly.js from the copy inside the installed plotly package, as static/vendor/plotly.min.js."""

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
STATIC_PATH = "vendor/plotly.min.js"


class VendorStorage(FileSystemStorage):
    """collectstatic copies a storage's files under its `prefix`."""

    prefix = "vendor"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(PLOTLY_JS.parent))

    def check(self, **kwargs):
        return []

    def find(self, path: str, find_all: bool = False, **kwargs):
        if path == STATIC_PATH:
            return [str(PLOTLY_JS)] if find_all else str(PLOTLY_JS)
        return [] if find_all else None

    def list(self, ignore_patterns):
        # collectstatic copies the file under the name pages link to.
        storage = VendorStorage(location=str(PLOTLY_JS.parent))
        yield PLOTLY_JS.name, storage
