from decimal import Decimal

from governance.dashboard.boxes import box_of
from governance.dashboard.figures import PALETTE
from governance.dashboard.figures.overview import (
    IdleRow,
    WasteRow,
    idle_cost_share,
    queue_wait_per_team,
    top_jobs_by_waste,
    utilisation_over_time,
)


def test_utilisation_is_drawn_against_a_dashed_forty_percent_line():
    figure = utilisation_over_time(["2026-11-03 10:00", "2026-11-03 11:00"], [22.5, 37.5])

    line, industry = figure["data"]
    assert line["y"] == [22.5, 37.5]
    assert industry["y"] == [40.0, 40.0] and industry["line"]["dash"] == "dash"
    assert industry["x"] == ["2026-11-03 10:00", "2026-11-03 11:00"]


def test_hours_without_readings_stay_gaps_in_the_line():
    figure = utilisation_over_time(["a", "b", "c"], [10.0, None, 30.0])

    assert figure["data"][0]["y"] == [10.0, None, 30.0] and figure["data"][0]["connectgaps"] is False


def test_no_hours_draw_no_industry_line():
    assert len(utilisation_over_time([], [])["data"]) == 1


def test_idle_cost_splits_each_teams_cost_and_names_the_currency():
    figure = idle_cost_share([IdleRow("NLP", Decimal("16.00"), 0.5), IdleRow("Vision", Decimal("8.00"), 0.25)], "EUR")

    busy, idle = figure["data"]
    assert busy["y"] == ["NLP", "Vision"] and busy["x"] == [8.0, 6.0]
    assert idle["x"] == [8.0, 2.0] and idle["customdata"] == [50.0, 25.0]
    assert figure["layout"]["barmode"] == "stack"
    assert "EUR" in idle["hovertemplate"] and "EUR" in figure["layout"]["xaxis"]["title"]["text"]


def test_queue_wait_is_one_box_per_team_with_its_quartiles():
    figure = queue_wait_per_team({"Vision": box_of([180.0]), "NLP": box_of([30.0, 60.0, 45.0, 40.0, 50.0])})

    nlp, vision = figure["data"]
    assert nlp["name"] == "NLP" and nlp["median"] == [45.0] and nlp["q1"] == [40.0] and nlp["q3"] == [50.0]
    assert nlp["lowerfence"] == [30.0] and nlp["upperfence"] == [60.0]
    assert vision["median"] == [180.0] and vision["hovertext"] == ["1 job"]
    assert nlp["marker"]["color"] == PALETTE[0] and vision["marker"]["color"] == PALETTE[1]


def test_an_outlier_wait_stays_outside_the_whiskers():
    figure = queue_wait_per_team({"NLP": box_of([10.0, 11.0, 12.0, 13.0, 14.0, 500.0])})

    assert figure["data"][0]["upperfence"] == [14.0]


def test_a_team_without_waits_draws_no_box():
    assert queue_wait_per_team({"NLP": box_of([])})["data"] == []


def test_top_waste_puts_the_worst_job_on_top_with_its_money():
    rows = [WasteRow("c1/2", "NLP", "bob", 4.0, Decimal("8.00")), WasteRow("c1/3", "Vision", "dave", 1.0, Decimal(2))]

    bar = top_jobs_by_waste(rows, "USD")["data"][0]

    assert bar["y"] == ["c1/3", "c1/2"] and bar["x"] == [1.0, 4.0]
    assert bar["customdata"][-1] == ["NLP", "bob", 8.0]
    assert "USD" in bar["hovertemplate"]
