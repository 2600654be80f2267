"""Request parsers: DRF's, with every hostile body a 400."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError

NESTED_TOO_DEEPLY = "JSON parse error - the body is nested too deeply."


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; a body nested deeper than Python's recursion limit is a 400, not a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(NESTED_TOO_DEEPLY) from None
