"""The background worker's helpers: one-off work in a passing thread."""

import threading

import pytest

from tabed.runner import in_passing_thread


def test_passing_work_runs_in_a_thread_that_has_ended_when_it_returns():
    seen = []
    result = in_passing_thread(lambda a, b: seen.append(threading.current_thread()) or a + b, 2, 3)
    assert result == 5
    assert seen[0] is not threading.current_thread() and not seen[0].is_alive()


def test_passing_work_raises_its_own_exception_in_the_caller():
    def failing():
        raise KeyError("no such preset")

    with pytest.raises(KeyError, match="no such preset"):
        in_passing_thread(failing)
