"""One comparison in the background: TABED, then plain decoding, never both at once.

The worker puts every engine event on a queue, tagged with its phase; a consumer (the app) drains
the queue at its own pace and can stop the worker at any time: the engine checks the stop flag
between blocks, so a stop takes effect within one block.

Every comparison, and the warm-up before them (`on_decoding_thread`), runs on one long-lived thread,
one after another. On a CPU, torch's thread pool (OpenMP) belongs to the thread that calls it: a second
calling thread makes a second pool, and with more pool threads than cores their idle threads sleep
between operations instead of spinning, which made TABED's many small operations up to twice as slow
on two cores (a fresh thread per run after a warm-up elsewhere: 1.7-2.3x plain decoding on the odd
example, against 2.9-4.4x when one thread did it all). It also keeps two runs off the pair's caches
at once.
"""

from __future__ import annotations

import concurrent.futures
import queue
import sys
import threading
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from .conversation import Turn
from .decoding import GenerationConfig, autoregressive_generate, speculative_generate
from .errors import TabedError
from .events import Event
from .models import ModelPair
from .spec import DraftingSpec

T = TypeVar("T")

SPECULATIVE, AUTOREGRESSIVE = "speculative", "autoregressive"
WORKER_THREAD = "tabed-worker"  # the name of the decoding thread


class DecodingThread:
    """One daemon thread that runs submitted calls in order (a daemon, so that quitting the app never
    waits for a run to finish)."""

    def __init__(self) -> None:
        self.jobs: queue.Queue = queue.Queue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def submit(self, function: Callable[..., T], *args, **kwargs) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self.lock:
            if self.thread is None or not self.thread.is_alive():  # first use, or a forked process (ZeroGPU)
                self.jobs = queue.Queue()
                self.thread = threading.Thread(target=self._serve, args=(self.jobs,), name=WORKER_THREAD,
                                               daemon=True)
                self.thread.start()
            self.jobs.put((future, function, args, kwargs))
        return future

    @staticmethod
    def _serve(jobs: queue.Queue) -> None:
        while True:
            future, function, args, kwargs = jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(function(*args, **kwargs))
                except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the future
                    future.set_exception(error)


_DECODING = DecodingThread()
_WORKERS: weakref.WeakSet[ComparisonWorker] = weakref.WeakSet()


def on_decoding_thread(function: Callable[..., T], *args, **kwargs) -> T:
    """Call `function` on the decoding thread (after any comparison queued before it) and return its
    result; called from that thread, it just runs."""
    if threading.current_thread() is _DECODING.thread:
        return function(*args, **kwargs)
    return _DECODING.submit(function, *args, **kwargs).result()


def comparisons_running() -> int:
    """Comparisons started and not finished (queued ones included)."""
    return sum(worker.alive for worker in list(_WORKERS))


@dataclass
class PhaseEvent:
    phase: str  # SPECULATIVE or AUTOREGRESSIVE
    event: Event


@dataclass
class Failure:
    """The run ended with an error; `message` is fit to show to a user."""

    message: str


class Done:
    """The worker has finished (after its last event or failure)."""


Item = PhaseEvent | Failure | Done


def user_message(error: BaseException) -> str:
    """A one-line explanation of an error for the page; details go to the server log."""
    if isinstance(error, TabedError):
        return str(error)
    if isinstance(error, torch.cuda.OutOfMemoryError):
        return ("the GPU ran out of memory: lower max new tokens, use fewer drafting methods or a "
                "smaller pair, and try again")
    return f"internal error ({type(error).__name__}: {error}); the details are in the server log"


class ComparisonWorker:
    """Runs speculative decoding and then (optionally) the autoregressive baseline on the decoding thread."""

    def __init__(
        self,
        pair: ModelPair,
        turns: list[Turn],
        spec: DraftingSpec,
        config: GenerationConfig,
        compare_ar: bool = True,
        captioner=None,
        stop_event: threading.Event | None = None,
    ) -> None:
        self.pair, self.turns, self.spec, self.config = pair, turns, spec, config
        self.compare_ar, self.captioner = compare_ar, captioner
        self.items: queue.Queue[Item] = queue.Queue()
        self.stop_event = stop_event or threading.Event()  # set from outside (a Stop button) or by stop()
        self.future: concurrent.futures.Future | None = None

    def start(self) -> ComparisonWorker:
        self.future = _DECODING.submit(self._run)
        _WORKERS.add(self)
        return self

    def _phases(self) -> list[tuple[str, Callable[[], object]]]:
        phases = [(SPECULATIVE, lambda: speculative_generate(
            self.pair, self.turns, self.spec, self.config, captioner=self.captioner, stop=self.stop_event))]
        if self.compare_ar:
            phases.append((AUTOREGRESSIVE, lambda: autoregressive_generate(
                self.pair, self.turns, self.config, stop=self.stop_event)))
        return phases

    def _run(self) -> None:
        try:
            for phase, start in self._phases():
                if self.stop_event.is_set():
                    break
                events = start()
                try:
                    for event in events:
                        self.items.put(PhaseEvent(phase, event))
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
        """Ask the worker to stop and wait for it; True when its run has ended."""
        self.stop_event.set()
        if self.future is not None:
            concurrent.futures.wait([self.future], timeout)
        return not self.alive

    @property
    def alive(self) -> bool:
        return self.future is not None and not self.future.done()
