"""Task delivery as governance/celery.py and settings configure it: ingest and pricing tasks are never lost."""

from governance.celery import app


def task(name: str):
    app.loader.import_default_modules()
    return app.tasks[name]


def test_ingest_and_pricing_tasks_ack_late_are_requeued_when_their_worker_dies_and_have_a_time_limit(settings):
    for name in ("usage.process_batch", "usage.sweep_inbox", "costs.check_budgets"):
        t = task(name)
        assert (t.acks_late, t.reject_on_worker_lost, t.time_limit) == (True, True, settings.TASK_TIME_LIMIT_S), name
        assert t.soft_time_limit < t.time_limit


def test_housekeeping_and_analysis_tasks_ack_early_and_run_as_long_as_they_need():
    for name in ("usage.maintain_partitions", "usage.purge_inbox", "efficiency.evaluate_running"):
        t = task(name)
        assert (t.acks_late, t.time_limit) == (False, None), name


def test_the_visibility_timeout_outlasts_a_task_and_its_longest_retry_countdown(settings):
    options = app.conf.broker_transport_options
    assert options["visibility_timeout"] > settings.TASK_TIME_LIMIT_S + settings.TASK_RETRY_BACKOFF_MAX_S
    assert task("usage.process_batch").max_retries == settings.TASK_MAX_RETRIES >= 10
