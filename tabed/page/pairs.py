"""The model pair the page decodes with, loaded once and kept between requests, what its forwards cost on this
machine when quiet, and the memory a finished run hands back."""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..bench.overhead import quiet_costs
from ..engine.loop import warm_up
from ..engine.speed import StepCosts
from ..models.loading import load_preset
from ..models.pair import ModelPair

REFRESH_S = 60.0  # quiet costs this old are measured again before the next run
ZERO_GPU_NOTE = "ZeroGPU: CUDA exists only inside a request there, so CUDA graphs are off and decoding runs eager"


@dataclass(frozen=True)
class Probe:
    """What a run's worker found before it began (`QuietMeter.measure`)."""

    costs: StepCosts | None  # the pair's quiet costs, this probe's or an earlier one's; None while none was quiet
    busy: bool  # this probe found the machine busy (none is taken while the costs are fresh)


class QuietMeter:
    """What the loaded pair's forwards cost on this machine when it is quiet (`bench/overhead.quiet_costs`), for
    each run's costs to be held against (`speed.RunCosts`: a run far off them measured the machine, not the
    method). A run's worker measures them before it decodes, in its own thread and torch threads, the first
    time and once they are `REFRESH_S` old; a probe that finds the machine busy keeps the costs it had, and the
    next run tries again, so the costs are always an idle machine's."""

    def __init__(self, probe: Callable[[ModelPair], StepCosts | None] = quiet_costs,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.probe, self.clock = probe, clock
        self.costs: StepCosts | None = None
        self.at: float | None = None  # when `costs` were measured (`clock`)

    def forget(self) -> None:
        """Another pair is loaded: its costs are its own."""
        self.costs = self.at = None

    def measure(self, pair: ModelPair) -> Probe:
        if self.at is not None and self.clock() - self.at < REFRESH_S:
            return Probe(self.costs, busy=False)
        fresh = self.probe(pair)
        if fresh is None:
            return Probe(self.costs, busy=True)
        self.costs, self.at = fresh, self.clock()
        return Probe(fresh, busy=False)


class PairCache:
    """One loaded pair at a time (memory); loading another preset replaces it, and forgets the quiet costs."""

    def __init__(self, zero_gpu: bool = False) -> None:
        self.zero_gpu = zero_gpu  # on ZeroGPU, CUDA exists only inside a request: no graphs, widened on the CPU
        self.lock = threading.Lock()
        self.name: str | None = None
        self.pair: ModelPair | None = None
        self.warm = False
        self.quiet: QuietMeter | None = QuietMeter()  # None: runs are held against no quiet costs

    def _load(self, name: str) -> ModelPair:
        if self.quiet is not None:
            self.quiet.forget()
        if not self.zero_gpu:
            return load_preset(name)
        pair = load_preset(name, cache="dynamic", widen_on="cpu")  # eager: graphs cannot outlive a request
        pair.notes.append(ZERO_GPU_NOTE)
        return pair

    def preload(self, name: str) -> None:
        """Load without a warm-up (on ZeroGPU, at import: `spaces` packs weights moved to CUDA there once)."""
        with self.lock:
            self.pair, self.name, self.warm = self._load(name), name, False

    def get(self, name: str) -> ModelPair:
        with self.lock:
            if self.name != name:
                self.pair, self.name = None, None
                self.pair, self.name, self.warm = self._load(name), name, False
            if not self.warm:
                warm_up(self.pair)
                self.warm = True
            return self.pair

    def loaded(self, name: str) -> bool:
        return self.name == name


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


LIBC = _libc()


def release_memory() -> None:
    """Hand the heap a finished run freed back to the system. glibc keeps freed memory in per-thread
    arenas, and Gradio's threads and the decoding thread take turns: a server's resident size grew 30%
    over its first 200 runs (Python objects: 3%) before levelling off; trimmed after each run, 3%. A
    no-op without glibc."""
    if LIBC is not None:
        LIBC.malloc_trim(0)
