from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from governance.api.auth import HasReadScope
from governance.api.renderers import CsvRenderer
from governance.costs.csv import team_month_csv
from governance.costs.selectors import chargeback_by_team
from governance.lib.money import to_cents
from governance.lib.months import Month
from governance.org.selectors import team_totals_filter


class MonthQuery(serializers.Serializer):
    month = serializers.RegexField(
        r"^(19|20|21)\d{2}-(0[1-9]|1[0-2])$", error_messages={"invalid": "Use YYYY-MM, a year from 1900 to 2199."}
    )


class TeamChargeSerializer(serializers.Serializer):
    month = serializers.CharField()
    team = serializers.CharField()
    gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=4)
    cost = serializers.DecimalField(max_digits=20, decimal_places=2)
    currency = serializers.CharField()


class ChargebackView(APIView):
    """Cost per team for one month: allocated GPU-hours x the rate in force. JSON, or CSV with ?format=csv."""

    permission_classes = [HasReadScope]
    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, CsvRenderer]

    @extend_schema(
        parameters=[MonthQuery],
        responses=TeamChargeSerializer(many=True),
    )
    def get(self, request: Request, format: str | None = None):
        query = MonthQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = Month.parse(query.validated_data["month"])
        charges = chargeback_by_team(month=month, where=team_totals_filter(user=request.user))
        if request.query_params.get("format") == "csv" or "text/csv" in request.headers.get("Accept", ""):
            response = StreamingHttpResponse(team_month_csv(charges), content_type="text/csv")
            response["Content-Disposition"] = f'attachment; filename="chargeback-{query.validated_data["month"]}.csv"'
            return response
        rows = [
            {
                "month": str(c.month),
                "team": c.team,
                "gpu_hours": c.gpu_hours,
                "cost": to_cents(c.cost),
                "currency": c.currency,
            }
            for c in charges
        ]
        return Response(TeamChargeSerializer(rows, many=True).data)
