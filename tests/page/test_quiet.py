"""What the pair costs on this machine when quiet: measured by a run's worker before it decodes, kept a while,
measured again only by a probe that finds the machine idle. Clocks and probes are set by hand here."""

import time

import pytest

from tabed.bench import overhead
from tabed.engine.settings import Settings
from tabed.engine.speed import StepCosts
from tabed.models.chat import Turn
from tabed.page.pairs import REFRESH_S, PairCache, Probe, QuietMeter
from tabed.page.worker import ComparisonWorker, Done, PhaseEvent

QUIET = StepCosts(0.01, 0.02, 6)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_costs_are_measured_once_then_again_when_old_and_a_busy_probe_keeps_them():
    found, probes, clock = [QUIET], [], Clock()
    meter = QuietMeter(probe=lambda pair: probes.append(pair) or found[0], clock=clock)
    assert meter.measure("pair") == Probe(QUIET, busy=False) and len(probes) == 1
    clock.now = REFRESH_S - 1
    assert meter.measure("pair") == Probe(QUIET, busy=False) and len(probes) == 1  # fresh: no probe
    clock.now, found[0] = REFRESH_S, None  # old, and the machine busy: the costs kept, the next run tries again
    assert meter.measure("pair") == Probe(QUIET, busy=True) and len(probes) == 2
    newer = StepCosts(0.012, 0.024, 6)
    clock.now, found[0] = REFRESH_S + 1, newer
    assert meter.measure("pair") == Probe(newer, busy=False) and len(probes) == 3
    clock.now = 2 * REFRESH_S
    assert meter.measure("pair").costs is newer and len(probes) == 3  # a refresh's age counts from itself


def test_a_machine_never_found_quiet_has_no_costs():
    meter = QuietMeter(probe=lambda pair: None, clock=Clock())
    assert meter.measure("pair") == Probe(None, busy=True) == meter.measure("pair")


def test_loading_another_pair_forgets_the_costs(monkeypatch):
    from tabed.page import pairs

    monkeypatch.setattr(pairs, "load_preset", lambda name, **kwargs: name)
    cache = PairCache()
    cache.quiet = QuietMeter(probe=lambda pair: QUIET, clock=Clock())
    cache.quiet.measure("teaching")
    probe = cache.quiet.probe
    cache.preload("teaching-7b")
    assert cache.quiet.costs is None and cache.quiet.probe is probe
    cache.quiet = None  # the tests' pages: no costs, whatever is loaded
    cache.preload("teaching")
    assert cache.quiet is None


def _items(worker: ComparisonWorker) -> list:
    worker.start().thread.join()
    return worker.drain(0)


@pytest.mark.parametrize("compare_ar", [True, False])
def test_a_runs_worker_measures_before_it_decodes_when_there_is_a_speed_to_hold(pair, image, compare_ar):
    """In its own thread, at its torch threads, before TABED's first event; without plain decoding there is no
    speedup to judge, and no probe."""
    measured = []

    def probe(used):
        import threading

        import torch
        measured.append((used, threading.current_thread().name, torch.get_num_threads()))
        return QUIET

    meter = QuietMeter(probe=probe, clock=Clock())
    settings = Settings.parse("tabed-MT", gamma=3, max_new_tokens=6)
    items = _items(ComparisonWorker(pair, [Turn("w1", [image])], settings, compare_ar=compare_ar,
                                    quiet=meter))
    assert isinstance(items[-1], Done) and all(isinstance(item, PhaseEvent) for item in items[compare_ar:-1])
    if compare_ar:
        assert items[0] == Probe(QUIET, busy=False) and measured == [(pair, "tabed-worker", 1)]
    else:
        assert not measured


def _fake_cpu(monkeypatch, share: float) -> None:
    """The process's CPU seconds: `share` of the wall clock's (a hair less between two readings)."""
    monkeypatch.setattr(overhead.time, "process_time", lambda: share * time.perf_counter())


@pytest.mark.parametrize("share, quiet", [(1.0, True), (0.96, True), (0.94, False), (0.6, False)])
def test_a_probe_that_got_too_little_of_the_cpu_finds_no_quiet_costs(pair, monkeypatch, share, quiet):
    """At 95% of its threads' cores or more the probe's costs are the machine's; under, it shared the machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _fake_cpu(monkeypatch, share)
        costs = overhead.quiet_costs(pair, steps=4)
    finally:
        torch.set_num_threads(threads)
    assert (costs is not None) == quiet
    if quiet:
        assert costs.tokens == overhead.QUIET_TOKENS == 6 and costs.step_s > 0 and costs.verify_s > 0


@pytest.mark.parametrize("share, quiet", [(1.96, True), (1.2, False)])
def test_a_probe_on_two_threads_needs_two_cores(monkeypatch, share, quiet):
    """Two torch threads that got 1.2 cores between them shared the machine, though one thread would not have."""
    import torch

    monkeypatch.setattr(overhead, "target_step_seconds", lambda pair, turns, count, steps: time.sleep(0.05) or 0.01)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    _fake_cpu(monkeypatch, share)
    cpu = type("Pair", (), {"device": torch.device("cpu")})()
    assert (overhead.quiet_costs(cpu) is not None) == quiet


def test_the_probe_gives_the_step_then_the_check_and_on_a_gpu_never_finds_the_machine_busy(monkeypatch):
    """The costs in their order (a plain step, a 6-token check); on a GPU the CPU share says nothing of the
    machine (its threads wait on the device), so a probe there always keeps its costs."""
    import torch

    monkeypatch.setattr(overhead, "target_step_seconds", lambda pair, turns, count, steps: 0.01 * count)
    _fake_cpu(monkeypatch, 0.05)
    cpu, gpu = (type("Pair", (), {"device": torch.device(kind)})() for kind in ("cpu", "cuda"))
    assert overhead.quiet_costs(cpu) is None
    assert overhead.quiet_costs(gpu) == StepCosts(0.01, 0.06, 6)
