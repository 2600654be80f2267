"""GET /api/v1/me/month/?month=YYYY-MM: the signed-in engineer's month, as /me/ shows it (one selector)."""

from __future__ import annotations

from django.urls import path
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.auth import HasReadScope
from governance.api.fields import MonthField
from governance.dashboard.me import my_month
from governance.lib.money import printed, to_cents
from governance.lib.months import Month
from governance.org.auth import signed_in_user


class MonthParam(serializers.Serializer):
    month = MonthField(required=False)


class AdviceSerializer(serializers.Serializer):
    finding_id = serializers.IntegerField()
    rule = serializers.CharField()
    title = serializers.CharField()
    advice = serializers.CharField()
    saving = serializers.DecimalField(max_digits=16, decimal_places=2)


class MyJobSerializer(serializers.Serializer):
    job_pk = serializers.IntegerField()
    job_id = serializers.CharField()
    cluster = serializers.CharField()
    team = serializers.CharField()
    project = serializers.CharField()
    gpu_hours = serializers.DecimalField(max_digits=16, decimal_places=2)
    cost = serializers.DecimalField(max_digits=16, decimal_places=2)
    idle_cost = serializers.DecimalField(max_digits=16, decimal_places=2)
    advice = AdviceSerializer(allow_null=True)


class MyMonthSerializer(serializers.Serializer):
    month = serializers.CharField()
    currency = serializers.CharField()
    cost = serializers.DecimalField(max_digits=16, decimal_places=2)
    idle_cost = serializers.DecimalField(max_digits=16, decimal_places=2)
    open_findings = serializers.IntegerField()
    jobs = MyJobSerializer(many=True)


class MyMonthView(APIView):
    """Your jobs charged in a month (costliest first) with cost, idle cost and the advice that would save most."""

    permission_classes = [HasReadScope]

    @extend_schema(parameters=[OpenApiParameter("month", str, description="YYYY-MM; the current month by default")],
                   responses=MyMonthSerializer)  # fmt: skip
    def get(self, request: Request) -> Response:
        query = MonthParam(data=request.query_params)
        query.is_valid(raise_exception=True)
        text = query.validated_data.get("month")
        month = Month.parse(text) if text else Month.of(timezone.now())
        mine = my_month(user=signed_in_user(request), month=month)
        jobs = []
        # Every job of the month under its total: placed to add up to it, as /me/ prints them.
        costs, idle = printed([j.cost for j in mine.jobs]), printed([j.idle_cost for j in mine.jobs])
        for j, cost, idle_cost in zip(mine.jobs, costs, idle, strict=True):
            a = mine.advice.get(j.job_pk)
            jobs.append({
                "job_pk": j.job_pk, "job_id": j.job_ref, "cluster": j.cluster, "team": j.team, "project": j.project,
                "gpu_hours": j.gpu_hours, "cost": cost, "idle_cost": idle_cost,
                "advice": None if a is None else {"finding_id": a.finding_pk, "rule": a.rule, "title": a.title,
                                                  "advice": a.advice, "saving": a.saving},
            })  # fmt: skip
        data = {"month": str(month), "currency": mine.currency, "cost": to_cents(mine.cost),
                "idle_cost": to_cents(mine.idle_cost), "open_findings": mine.open_findings, "jobs": jobs}  # fmt: skip
        return Response(MyMonthSerializer(data).data)


URLS = [path("me/month/", MyMonthView.as_view(), name="me-month")]
