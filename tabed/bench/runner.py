"""`python -m tabed bench`: the paper's Table 1 for any pair, and walltime against plain decoding and a peer.

For every case of a suite and every drafting spec, the target decodes the case alone (AR) and then
speculatively (SD), back to back, after a warm-up: drift hits both sides alike. Greedy runs also
check that SD gave AR's tokens. The peer is transformers' own assisted generation
(`generate(assistant_model=drafter)`) on the same pair and cases, timed the same way.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..engine.acceptance import Acceptance
from ..engine.config import GenerationConfig
from ..engine.events import GenerationResult
from ..engine.loop import autoregressive_generate, collect, speculative_generate, warm_up
from ..engine.sampling import is_greedy
from ..engine.settings import Settings
from ..engine.spec import DEFAULT_SPEC
from ..errors import InputError
from ..models.chat import Turn
from ..models.pair import ModelPair
from .divergence import divergence
from .machine import describe_machine
from .overhead import batching_overhead
from .peers import PEER_NOTE, PEERS, is_peer, peer_generate
from .report import goals, pooled, summarize, write_reports
from .rows import row_settings
from .suite import Case, Run, case_turns, in_turn, limit_cases, load_suite


def _sd_run(pair: ModelPair, case: Case, turns: list[Turn], spec: str, config: GenerationConfig,
            ar: GenerationResult) -> Run:
    row = row_settings(Settings(config=config), spec)
    result = collect(speculative_generate(pair, turns, row.spec, row.config))
    m = result.metrics
    counts = Acceptance.count(result.blocks)
    return Run(case.id, case.scenario, spec, m.new_tokens, m.target_forwards, max(0, m.new_tokens - 1),
               m.accepted, m.drafted, m.walltime_s, m.draft_s, m.verify_s, m.weights_s, m.decode_s,
               ar.metrics.walltime_s, ar.metrics.decode_s, busy=m.busy or ar.metrics.busy,
               accepted_histogram=counts.histogram, position_drafted=[c.drafted for c in counts.positions],
               position_kept=[c.kept for c in counts.positions], blocks=len(result.blocks),
               nodes=sum(len(block.tree) or len(block.draft) for block in result.blocks),
               **_checked(pair, turns, config, ar.token_ids, result.token_ids))


def _checked(pair: ModelPair, turns: list[Turn], config: GenerationConfig, plain: list[int],
             ids: list[int]) -> dict:
    """A greedy run's mismatch with plain decoding, and where and how narrowly it left it."""
    if not is_greedy(config.temperature) or ids == plain:
        return {"mismatch": False}
    return {"mismatch": True, "divergence": divergence(pair, turns, plain, ids)}


def _peer_run(pair: ModelPair, case: Case, turns: list[Turn], config: GenerationConfig,
              ar: GenerationResult, peer: str) -> Run:
    """The peer's prefill cannot be told apart from its decoding: its decode time is its walltime."""
    try:
        ids, seconds, forwards = peer_generate(pair, turns, config, peer)
    except Exception as exc:  # noqa: BLE001 - a peer's own failure is a result to report, not a crash
        message = " ".join(str(exc).split())[:200] or type(exc).__name__
        return Run(case.id, case.scenario, peer, 0, 0, 0, error=f"{type(exc).__name__}: {message}")
    return Run(case.id, case.scenario, peer, len(ids), forwards, len(ids), walltime_s=seconds, decode_s=seconds,
               ar_walltime_s=ar.metrics.walltime_s, ar_decode_s=ar.metrics.walltime_s,
               **_checked(pair, turns, config, ar.token_ids, ids))


def run_case(pair: ModelPair, case: Case, root: Path, specs: list[str], config: GenerationConfig,
             peer: bool, repeat: int = 1) -> list[Run]:
    """Each spec (and the peer) right after its own AR run on the same case; with `repeat`, all of them
    that many times in turn, each spec's times the medians of its repeats."""
    turns = case_turns(case, root)
    every = [*specs, *(PEERS if peer else ())]
    repeats: dict[str, list[Run]] = {spec: [] for spec in every}
    for _ in range(repeat):
        for spec in every:
            ar = collect(autoregressive_generate(pair, turns, config))
            if is_peer(spec):
                repeats[spec].append(_peer_run(pair, case, turns, config, ar, spec))
            else:
                repeats[spec].append(_sd_run(pair, case, turns, spec, config, ar))
    return [median_run(repeats[spec]) for spec in every]


TIMED = ("walltime_s", "draft_s", "verify_s", "weights_s", "decode_s", "ar_walltime_s", "ar_decode_s")


def median_run(runs: list[Run]) -> Run:
    """One case's repeats of one spec as one run: each time the median of its repeats (a moment when the
    machine was busy moves none of them), the counts of the first, and a mismatch or error if any had one."""
    first = runs[0]
    times = {name: statistics.median(getattr(r, name) for r in runs) for name in TIMED}
    mismatched = next((r for r in runs if r.mismatch), first)
    return replace(first, **times, mismatch=mismatched.mismatch, divergence=mismatched.divergence,
                   busy=2 * sum(r.busy for r in runs) > len(runs),  # the medians come from busy runs
                   error=next((r.error for r in runs if r.error), ""))


@dataclass
class BenchSettings:
    suite: Path
    specs: list[str]
    config: GenerationConfig
    out: Path
    peer: bool = False
    limit: int | None = None
    overhead: bool = True
    notes: list[str] = field(default_factory=list)
    repeat: int = 1  # each case's specs run this many times in turn; times are the medians


def check_settings(settings: BenchSettings) -> list[Case]:
    """The cases to run, once every spec and the suite are known to be good: fail before any work
    (loading a pair takes seconds, a 7B one minutes)."""
    for spec in settings.specs:
        row_settings(Settings(config=settings.config), spec)
    if not 1 <= settings.repeat <= 100:
        raise InputError(f"repeat must be between 1 and 100, got {settings.repeat}")
    return in_turn(limit_cases(load_suite(settings.suite), settings.limit))


def run_bench(pair: ModelPair, settings: BenchSettings, progress: Callable[[str], None] = lambda line: None) -> dict:
    """Run the suite, writing the reports after every case (an interrupted run keeps what it measured)."""
    cases = check_settings(settings)
    root = settings.suite.parent
    report = {"pair": pair.name, "default_spec": DEFAULT_SPEC, "device": str(pair.device),
              "dtype": str(pair.dtype).removeprefix("torch."), "machine": None,  # known once warmed up (below)
              "suite": str(settings.suite), "gamma": settings.config.gamma,
              "adaptive": settings.config.adaptive,
              "max_new_tokens": settings.config.max_new_tokens, "temperature": settings.config.temperature,
              "specs_run": settings.specs + (list(PEERS) if settings.peer else []), "cases": 0, "complete": False,
              "notes": list(settings.notes) + ([PEER_NOTE] if settings.peer else []),
              "timing": "each spec right after its own AR run of the same case, after one untimed warm-up case. "
                        "speedup_vs_ar: summed AR decode time / summed SD decode time (the prefill, one target "
                        "forward, is the same on both sides); walltime_speedup_vs_ar and speedup_vs_peer: the "
                        "same with prefill included" + (
                            f"; every case's specs run {settings.repeat} times in turn, each time (SD's and its "
                            "AR run's) the median of its repeats" if settings.repeat > 1 else ""),
              "repeat": settings.repeat}
    warm_up(pair)
    run_case(pair, cases[0], root, settings.specs, settings.config, settings.peer)  # untimed warm-up
    report["notes"] += [note for note in pair.notes if note not in report["notes"]]  # e.g. graphs or compiling failed
    report["machine"] = describe_machine(pair.device, pair.linears, pair.compiled_roles)  # what compiled, too
    runs: list[Run] = []
    started = time.perf_counter()
    try:
        for index, case in enumerate(cases, 1):
            runs += run_case(pair, case, root, settings.specs, settings.config, settings.peer, settings.repeat)
            report.update(summarize(runs), cases=index, runs=[asdict(r) for r in runs])
            write_reports(report, settings.out)
            mine = {r.spec: r for r in runs[-len(report["specs_run"]):]}
            eta = (time.perf_counter() - started) / index * (len(cases) - index)
            progress(f"{index}/{len(cases)} {case.scenario}/{case.id}: " + ", ".join(
                f"{spec} {pooled([r.emitted], [r.target_forwards]):.2f}" for spec, r in mine.items())
                + f"  eta {eta:.0f} s")
        if settings.overhead:
            report["overhead"] = overheads(pair, cases, root, report)
        report["complete"] = True
    finally:
        report["goals"] = goals(report, report["default_spec"]) if runs else []
        if runs:
            write_reports(report, settings.out)
    return report


def overheads(pair: ModelPair, cases: list[Case], root: Path, report: dict) -> dict:
    """Batched drafting (K rows against 1) on the first pictured case; weights' share of decode time."""
    out: dict = {}
    pictured = next((c for c in cases if c.images), None)
    if pictured is not None:
        ratios = batching_overhead(pair, case_turns(pictured, root)[:1])
        out["batched_drafting"] = {str(k): v for k, v in ratios.items() if isinstance(k, int)}
    shares = {}
    for spec in report["specs_run"]:
        rows = [s["specs"][spec] for s in report["scenarios"].values() if spec in s["specs"]]
        if spec.startswith("tabed") and rows:
            shares[spec] = pooled((r["weights_s"] for r in rows), (r["decode_s"] for r in rows))
    out["weights_share"] = shares
    return out


def log(line: str) -> None:
    print(f"[bench] {line}", file=sys.stderr, flush=True)
