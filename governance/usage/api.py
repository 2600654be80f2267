import gzip
import zlib

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import parsers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collectors.records import BatchInvalid
from governance.api.auth import HasIngestScope
from governance.api.errors import error_response
from governance.usage.services import BatchConflict, usage_batch_receive

BODY_TOO_LARGE = "The batch is larger than {limit} bytes after decompression; send smaller batches."
BODY_NOT_GZIP = "Content-Encoding is gzip but the body is not valid gzip."


class RawBodyParser(parsers.BaseParser):
    """Leaves the body as bytes: the ingest path decodes and validates it in one msgspec pass."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read()


class BodyTooLarge(Exception):
    pass


def _read_body(request: Request) -> bytes:
    limit = settings.INGEST_MAX_BODY_BYTES
    try:
        body = request._request.body  # raw bytes; never parsed by DRF
    except RequestDataTooBig:
        raise BodyTooLarge(BODY_TOO_LARGE.format(limit=limit)) from None
    if request.headers.get("Content-Encoding", "").lower() == "gzip":
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            body = decompressor.decompress(body, limit + 1)
        except zlib.error:
            raise gzip.BadGzipFile(BODY_NOT_GZIP) from None
    if len(body) > limit:
        raise BodyTooLarge(BODY_TOO_LARGE.format(limit=limit))
    return body


class IngestView(APIView):
    """Accept a batch of job and sample records; 202 means it is stored and will be processed."""

    permission_classes = [HasIngestScope]
    parser_classes = [RawBodyParser]
    throttle_scope = "ingest"

    @extend_schema(
        request={"application/json": {"type": "object"}},
        responses={
            202: OpenApiResponse(description="Stored; processed asynchronously."),
            400: OpenApiResponse(description="Invalid records, each with index, field and reason."),
            409: OpenApiResponse(description="The batch id was seen with other records."),
            413: OpenApiResponse(description="The batch is too large."),
        },
    )
    def post(self, request: Request) -> Response:
        try:
            receipt = usage_batch_receive(body=_read_body(request))
        except BodyTooLarge as exc:
            return error_response(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "too_large", str(exc))
        except gzip.BadGzipFile as exc:
            return error_response(status.HTTP_400_BAD_REQUEST, "bad_encoding", str(exc))
        except BatchInvalid as exc:
            details = [e.as_dict() for e in exc.errors]
            message = "The batch has invalid records; nothing was stored."
            return error_response(status.HTTP_400_BAD_REQUEST, "invalid_records", message, details)
        except BatchConflict as exc:
            return error_response(status.HTTP_409_CONFLICT, "batch_conflict", str(exc))
        return Response(
            {"batch_id": str(receipt.batch_id), "records": receipt.records, "duplicate": receipt.duplicate},
            status=status.HTTP_202_ACCEPTED,
        )
