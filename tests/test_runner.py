"""The decoding thread: the warm-up and every comparison run on it, one after another; idle, it ends."""

import concurrent.futures
import threading

from tabed import runner
from tabed.conversation import Turn
from tabed.decoding import GenerationConfig
from tabed.events import Finished
from tabed.runner import WORKER_THREAD, ComparisonWorker, Done, PhaseEvent, comparisons_running, on_decoding_thread
from tabed.spec import parse_spec


class Spy(ComparisonWorker):
    """A worker that notes the thread it ran on and when it began and ended, among the others."""

    log: list[tuple[str, int, threading.Thread]] = []

    def _run(self) -> None:
        self.log.append(("begin", id(self), threading.current_thread()))
        super()._run()
        self.log.append(("end", id(self), threading.current_thread()))


def test_comparisons_share_the_decoding_thread_and_never_overlap(pair, image):
    """Two comparisons started back to back (the second while the first decodes) run in turn on one
    thread, the decoding thread that a warm-up goes through too, and each delivers its whole run."""
    Spy.log.clear()
    warm_up_thread = on_decoding_thread(threading.current_thread)
    assert warm_up_thread is not threading.current_thread() and warm_up_thread.name == WORKER_THREAD
    assert on_decoding_thread(on_decoding_thread, threading.current_thread) is warm_up_thread  # no deadlock
    turns = [Turn("w1 w2", [image])]
    workers = [Spy(pair, turns, parse_spec("tabed-MT"), GenerationConfig(max_new_tokens=40)).start()
               for _ in range(2)]
    assert comparisons_running() == 2
    concurrent.futures.wait([worker.future for worker in workers], timeout=60)
    assert comparisons_running() == 0
    assert [what for what, _, _ in Spy.log] == ["begin", "end", "begin", "end"]
    assert len({thread for _, _, thread in Spy.log}) == 1
    assert Spy.log[0][2].name == WORKER_THREAD
    for worker in workers:
        items = worker.drain()
        while not isinstance(items[-1], Done):
            items += worker.drain()
        finished = [item.event for item in items if isinstance(item, PhaseEvent) and isinstance(item.event, Finished)]
        assert [event.result.mode for event in finished] == ["speculative", "autoregressive"]


def test_the_decoding_thread_ends_when_idle_and_a_new_one_takes_the_next_call(monkeypatch):
    """An idle decoding thread ends (its CPU thread pool with it, which would otherwise slow down
    computing elsewhere in the process); the next call starts a fresh one and still gets its answer."""
    monkeypatch.setattr(runner, "IDLE_EXIT_S", 0.05)
    first = on_decoding_thread(threading.current_thread)
    first.join(timeout=5)
    assert not first.is_alive()
    assert on_decoding_thread(lambda: 6 * 7) == 42
    assert on_decoding_thread(threading.current_thread) is not first
