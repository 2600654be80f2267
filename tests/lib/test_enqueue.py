"""Coalesced enqueues: one message per window of seconds from a process, due at the window's end, whatever the
commits in the window; once per commit when tasks run eagerly."""

from types import SimpleNamespace

import pytest

from governance.lib import enqueue


class FakeTask:
    def __init__(self, *, eager: bool = False, fails: int = 0) -> None:
        self.app = SimpleNamespace(conf=SimpleNamespace(task_always_eager=eager))
        self.sent: list[dict] = []
        self.fails = fails

    def apply_async(self, args=(), **options) -> None:
        if self.fails:
            self.fails -= 1
            raise ConnectionError("broker down")
        self.sent.append(options)


@pytest.fixture
def clock(monkeypatch):
    now = [1_800_000_000.25]
    monkeypatch.setattr(enqueue.time, "time", lambda: now[0])
    monkeypatch.setattr(enqueue, "_window_sent", {})
    return now


@pytest.fixture
def on_commit_now(monkeypatch):
    monkeypatch.setattr(enqueue.transaction, "on_commit", lambda fn: fn())


def test_three_commits_in_one_second_send_one_message_due_at_its_end(clock, on_commit_now, monkeypatch):
    task = FakeTask()
    monkeypatch.setattr(enqueue, "task_named", lambda name: task)

    for _ in range(3):
        enqueue.enqueue_coalesced_on_commit("costs.reprice", every_s=1.0)
        clock[0] += 0.2

    assert task.sent == [{"countdown": pytest.approx(0.75)}]


def test_a_commit_in_the_next_window_sends_the_next_message(clock, on_commit_now, monkeypatch):
    task = FakeTask()
    monkeypatch.setattr(enqueue, "task_named", lambda name: task)

    enqueue.enqueue_coalesced_on_commit("costs.reprice", every_s=1.0)
    clock[0] += 1.0
    enqueue.enqueue_coalesced_on_commit("costs.reprice", every_s=1.0)

    assert len(task.sent) == 2


def test_eager_tasks_run_once_per_commit(clock, on_commit_now, monkeypatch):
    task = FakeTask(eager=True)
    monkeypatch.setattr(enqueue, "task_named", lambda name: task)

    for _ in range(3):
        enqueue.enqueue_coalesced_on_commit("costs.reprice", every_s=1.0)

    assert task.sent == [{}, {}, {}]


def test_a_failed_send_is_tried_again_by_the_next_commit_of_the_window(clock, on_commit_now, monkeypatch):
    task = FakeTask(fails=1)
    monkeypatch.setattr(enqueue, "task_named", lambda name: task)

    enqueue.enqueue_coalesced_on_commit("costs.reprice", every_s=1.0)
    enqueue.enqueue_coalesced_on_commit("costs.reprice", every_s=1.0)

    assert len(task.sent) == 1
