"""The decoding thread: the warm-up and every comparison run on one thread, one after another."""

import concurrent.futures
import threading

from tabed.conversation import Turn
from tabed.decoding import GenerationConfig
from tabed.events import Finished
from tabed.runner import ComparisonWorker, Done, PhaseEvent, comparisons_running, on_decoding_thread
from tabed.spec import parse_spec


class Spy(ComparisonWorker):
    """A worker that notes the thread it ran on and when it began and ended, among the others."""

    log: list[tuple[str, int, threading.Thread]] = []

    def _run(self) -> None:
        self.log.append(("begin", id(self), threading.current_thread()))
        super()._run()
        self.log.append(("end", id(self), threading.current_thread()))


def test_warm_up_and_comparisons_share_one_thread_and_never_overlap(pair, image):
    """Two comparisons started back to back (the second while the first decodes) run in turn on the
    thread that also ran the warm-up, and each still delivers its whole run."""
    Spy.log.clear()
    warm_up_thread = on_decoding_thread(threading.current_thread)
    assert warm_up_thread is not threading.current_thread()
    assert on_decoding_thread(on_decoding_thread, threading.current_thread) is warm_up_thread  # no deadlock
    turns = [Turn("w1 w2", [image])]
    workers = [Spy(pair, turns, parse_spec("tabed-MT"), GenerationConfig(max_new_tokens=40)).start()
               for _ in range(2)]
    assert comparisons_running() == 2
    concurrent.futures.wait([worker.future for worker in workers], timeout=60)
    assert comparisons_running() == 0
    assert [what for what, _, _ in Spy.log] == ["begin", "end", "begin", "end"]
    assert {thread for _, _, thread in Spy.log} == {warm_up_thread}
    for worker in workers:
        items = worker.drain()
        while not isinstance(items[-1], Done):
            items += worker.drain()
        finished = [item.event for item in items if isinstance(item, PhaseEvent) and isinstance(item.event, Finished)]
        assert [event.result.mode for event in finished] == ["speculative", "autoregressive"]
