"""One comparison in a background thread: TABED, then plain decoding (each again, alternately, for as many
repeats as asked), then (if asked) each method drafting alone, never two at once; before them, with plain
decoding, what the pair costs on this machine quiet (`pairs.QuietMeter`), measured as the runs run.

The worker puts every engine event on a queue, tagged with its phase; a consumer (the app) drains
the queue at its own pace and can stop the worker at any time: the engine checks the stop flag
between blocks, so a stop takes effect within one block.

On a CPU the worker decodes with `CPU_THREADS`, one torch intra-op thread in its own thread. torch's
OpenMP keeps a team of threads per calling thread, and with the team the loading thread left behind there
are more OpenMP threads than CPUs, where libgomp waits 100 spins instead of 300,000 before it puts an idle
thread to sleep (its GOMP_SPINCOUNT documentation). Every one of the drafter's thousands of small operations
then waits for sleeping threads to wake: TABED decoded 2-3x slower in a worker thread than in the main
thread, plain decoding 1.05x (measured on 2 cores). One thread has no team to wake, decodes as fast as the
main thread's two, and leaves the other cores to the server and a browser.
"""

from __future__ import annotations

import queue
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..engine.events import Event
from ..engine.loop import autoregressive_generate, speculative_generate
from ..engine.settings import Settings
from ..engine.spec import DraftingSpec
from ..errors import TabedError
from ..models.chat import Turn
from ..models.pair import ModelPair
from .pairs import Probe, QuietMeter

SPECULATIVE, AUTOREGRESSIVE = "speculative", "autoregressive"
ALONE = "alone"  # the phase of a method drafting alone, for comparison (`PhaseEvent.method` names it)
WORKER_THREAD = "tabed-worker"  # the name of every worker thread
CPU_THREADS = 1  # torch threads of a worker on a CPU: why above


@dataclass
class PhaseEvent:
    phase: str  # SPECULATIVE, AUTOREGRESSIVE or ALONE
    event: Event
    method: str | None = None  # the method drafting alone, in the ALONE phase
    repeat: int = 0  # which run of the request's repeats (0: the first, the one streamed)


@dataclass
class Failure:
    """The run ended with an error; `message` is fit to show to a user."""

    message: str


class Done:
    """The worker has finished (after its last event or failure)."""


Item = Probe | PhaseEvent | Failure | Done


def user_message(error: BaseException) -> str:
    """A one-line explanation of an error for the page; details go to the server log."""
    if isinstance(error, TabedError):
        return str(error)
    if isinstance(error, torch.cuda.OutOfMemoryError):
        return ("the GPU ran out of memory: lower max new tokens, use fewer drafting methods or a "
                "smaller pair, and try again")
    return f"internal error ({type(error).__name__}: {error}); the details are in the server log"


class ComparisonWorker:
    """Runs speculative decoding and then (optionally) the autoregressive baseline in a thread."""

    def __init__(
        self,
        pair: ModelPair,
        turns: list[Turn],
        settings: Settings,
        compare_ar: bool = True,
        alone: tuple[str, ...] = (),
        cancel: threading.Event | None = None,
        repeat: int = 1,
        quiet: QuietMeter | None = None,
    ) -> None:
        self.pair, self.turns, self.settings, self.repeat, self.quiet = pair, turns, settings, repeat, quiet
        self.compare_ar, self.alone = compare_ar, alone
        self.items: queue.Queue[Item] = queue.Queue()
        self.cancel = cancel or threading.Event()  # set from outside (a Stop button) or by stop()
        self.thread = threading.Thread(target=self._run, name=WORKER_THREAD, daemon=True)

    def start(self) -> ComparisonWorker:
        self.thread.start()
        return self

    def _phases(self) -> list[tuple[str, str | None, int, Callable[[], object]]]:
        """(phase, the method alone or None, the repeat, its generator's start), in the order they run: TABED
        and plain decoding alternately, `repeat` times each (a repeat needs plain decoding: alone, once)."""
        phases = []
        for repeat in range(self.repeat if self.compare_ar else 1):
            phases.append((SPECULATIVE, None, repeat, lambda: speculative_generate(
                self.pair, self.turns, self.settings.spec, self.settings.config, cancel=self.cancel)))
            if self.compare_ar:
                phases.append((AUTOREGRESSIVE, None, repeat, lambda: autoregressive_generate(
                    self.pair, self.turns, self.settings.config, cancel=self.cancel)))
        for method in self.alone:  # each method drafting alone, with the same settings: its real figures
            phases.append((ALONE, method, 0, lambda method=method: speculative_generate(
                self.pair, self.turns, DraftingSpec((method,)), self.settings.config, cancel=self.cancel)))
        return phases

    def _run(self) -> None:
        try:
            if self.pair.device.type == "cpu":
                torch.set_num_threads(CPU_THREADS)  # this thread's (and threads started later; not the caller's)
            if self.quiet is not None and self.compare_ar:  # what the run's costs are held against, as it runs
                self.items.put(self.quiet.measure(self.pair))
            for phase, method, repeat, start in self._phases():
                if self.cancel.is_set():
                    break
                events = start()
                try:
                    for event in events:
                        self.items.put(PhaseEvent(phase, event, method, repeat))
                finally:
                    events.close()
        except Exception as error:  # noqa: BLE001 - every failure must reach the page as a message
            if not isinstance(error, TabedError):
                traceback.print_exc(file=sys.stderr)
            if isinstance(error, torch.cuda.OutOfMemoryError):
                torch.cuda.empty_cache()
            self.items.put(Failure(user_message(error)))
        finally:
            self.items.put(Done())

    def drain(self, wait: float = 0.1) -> list[Item]:
        """Everything queued now, waiting up to `wait` seconds for the first item."""
        try:
            items = [self.items.get(timeout=wait)]
        except queue.Empty:
            return []
        while True:
            try:
                items.append(self.items.get_nowait())
            except queue.Empty:
                return items

    def stop(self, timeout: float = 5.0) -> bool:
        """Ask the worker to stop and wait for it; True when the thread has ended."""
        self.cancel.set()
        if self.thread.is_alive():
            self.thread.join(timeout)
        return not self.thread.is_alive()
