"""Why a speculative answer was as fast as it was, in plain decoding's steps.

Plain decoding makes one target step per token after the prompt's pass. Speculative decoding makes one
target pass per block: a verify, which costs more than a step (it scores several tokens), after drafting,
which costs something too (the first block's drafting includes the drafter's prefill, which plain decoding
does not make). So the speedup is the plain steps one pass replaces (tokens per pass) over what a pass and
its drafting cost, in plain steps:

    speedup ≈ tokens per pass / (verify + drafting)

The costs come from the run's own timings, and plain decoding's of the same answer; the time that is neither
drafting nor verifying (the weights, bookkeeping) is left out of the prediction, so that where the
prediction misses it says how much of the time went elsewhere. The page and the bench read the same model.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .events import GenerationResult, Metrics

REPEATS = (1, 9)  # how many times a request may run each side, alternately, for the median of its speedups

TOLERANCE = 0.15  # a prediction within this share of the measured speedup explains it
TIMED_TOKENS = 8  # answers shorter than this are too short for a speedup to mean anything
# A run whose plain steps or checks cost more than this times the same forwards on this machine quiet (each at its
# median) measured the machine's other work: through the page's API on a 2-core Xeon, one torch thread, the
# teaching pair's chart example, quiet runs came within 1.12× of the quiet costs measured before them (their
# means 1.27–1.37×: the page's streaming), runs beside two busy processes at 2.2× and more (means 2.8–3.4×).
FAR = 1.5


@dataclass(frozen=True)
class SpeedModel:
    """What one answer's speedup over plain decoding is made of (costs in plain decoding's steps)."""

    tokens_per_pass: float  # plain steps one target pass of ours replaced: the answer's decode tokens per pass
    verify: float  # a verify's cost
    drafting: float  # a pass's drafting
    draft_token: float  # one drafted token's drafting
    drafts_per_kept: float  # drafts made per draft the target kept (inf: none kept)
    other: float  # the rest of a pass (the weights, bookkeeping), which the prediction leaves out
    measured: float  # plain decoding's decode time over ours

    @property
    def predicted(self) -> float:
        return self.tokens_per_pass / (self.verify + self.drafting)

    @property
    def pass_cost(self) -> float:
        """A whole pass's cost: its verify, its drafting and the rest."""
        return self.verify + self.drafting + self.other

    @property
    def whole(self) -> float:
        """The speedup a whole pass's cost predicts (the measured one, but for the clocks' noise)."""
        return self.tokens_per_pass / self.pass_cost

    @property
    def error(self) -> float:
        """The prediction's relative miss: predicted / measured − 1."""
        return self.predicted / self.measured - 1.0

    def sentence(self, rest: str = "the weights and bookkeeping") -> str:
        """The model in plain words, every part of the decode time named, e.g. "3.20 tokens per target pass;
        its verify cost 1.35 plain steps and its drafting 0.70 more: expected 1.56×; the weights and
        bookkeeping took 0.03 more a pass: measured 1.55×". `rest`: what the other time was (a single
        method has no weights)."""
        return (f"{self.tokens_per_pass:.2f} tokens per target pass; its verify cost {self.verify:.2f} plain steps "
                f"and its drafting {self.drafting:.2f} more: expected {self.predicted:.2f}×; {rest} took "
                f"{self.other:.2f} more a pass: measured {self.measured:.2f}×")

    def why_off(self) -> str | None:
        """Why the prediction missed by more than `TOLERANCE` (None when it did not)."""
        if abs(self.error) <= TOLERANCE:
            return None
        share = self.other / self.pass_cost
        return (f"{share:.0%} of the decode time went neither to drafting nor to verifying (the weights, "
                "bookkeeping)" if self.other > 0 else "the phases' timings add up to more than the decode time")


def speed_model(steps: int, passes: int, drafted: int, accepted: int, draft_s: float, verify_s: float,
                decode_s: float, plain_decode_s: float) -> SpeedModel | None:
    """The model of an answer (or answers: the figures summed) that plain decoding made in `steps` steps after
    the prompt's pass (its tokens but the first) in `plain_decode_s`, and speculative decoding in `passes`
    target passes after the prompt's, `draft_s` and `verify_s` of them inside `decode_s`; None when there is
    nothing to compare."""
    if steps < 1 or passes < 1 or decode_s <= 0 or plain_decode_s <= 0 or draft_s + verify_s <= 0:
        return None
    step_s = plain_decode_s / steps
    return SpeedModel(tokens_per_pass=steps / passes, verify=verify_s / passes / step_s,
                      drafting=draft_s / passes / step_s, draft_token=draft_s / drafted / step_s if drafted else 0.0,
                      drafts_per_kept=drafted / accepted if accepted else float("inf"),
                      other=(decode_s - draft_s - verify_s) / passes / step_s, measured=plain_decode_s / decode_s)


def decode_speedup(ours: Metrics, plain: Metrics) -> float | None:
    """Plain decoding's decode time over ours for as many tokens: per decode step (every token but the first,
    which the prompt's pass gives), so that two samples of different lengths compare too. For answers of one
    length it is the ratio of the decode times. None when either side has no decode step to time."""
    steps, plain_steps = ours.new_tokens - 1, plain.new_tokens - 1
    if steps < 1 or plain_steps < 1 or ours.decode_s <= 0:
        return None
    return plain.decode_s / plain_steps * steps / ours.decode_s


def answer_speed(ours: Metrics, plain: Metrics) -> SpeedModel | None:
    """The model of one answer from both sides' metrics (for samples of two lengths, plain decoding's time for
    as many steps as ours: `decode_speedup`); None when there is nothing to compare."""
    speedup = decode_speedup(ours, plain)
    if speedup is None:
        return None
    return speed_model(ours.new_tokens - 1, ours.target_forwards - 1, ours.drafted, ours.accepted, ours.draft_s,
                       ours.verify_s, ours.decode_s, speedup * ours.decode_s)


@dataclass(frozen=True)
class StepCosts:
    """What the target's forwards cost on this machine when it is quiet (seconds): one token's, a plain decoding
    step, and `tokens`', a verify; measured before a run (`bench/overhead.quiet_costs`)."""

    step_s: float
    verify_s: float
    tokens: int

    def forward_s(self, count: float) -> float:
        """A forward of `count` tokens, on the line through the two measured (a forward's cost grows about
        linearly with its tokens on a CPU, and little on a GPU)."""
        return self.step_s + (count - 1) * (self.verify_s - self.step_s) / (self.tokens - 1)


@dataclass(frozen=True)
class RunCosts:
    """What one run's target forwards cost against the same forwards on this machine quiet, each kind at its
    median: the speedup is plain decoding's steps against our checks, so that a machine that slowed either
    measured itself, not the method. Medians, since the page's own work (streaming the tokens) stalls a forward
    now and then, where a busy machine slows most of them."""

    step_s: float  # plain decoding's median step
    checks: float  # our median check (verify) over the same check's quiet cost
    quiet: StepCosts

    @property
    def steps(self) -> float:
        """Plain decoding's median step over the quiet one."""
        return self.step_s / self.quiet.step_s

    @property
    def slower(self) -> float:
        """How many times their quiet costs the slower of the two kinds of forward cost."""
        return max(self.steps, self.checks)

    @property
    def far(self) -> bool:
        """The machine was busy: a kind of forward cost more than `FAR` times its quiet cost."""
        return self.slower > FAR


def run_costs(ours: GenerationResult, plain: GenerationResult, quiet: StepCosts) -> RunCosts | None:
    """`ours`' checks after the prompt's pass (a chain's drafts and the last token, a tree's nodes and the last
    token) and plain decoding's steps after it, against `quiet`; None when either side has none."""
    passes, steps = ours.blocks[1:], [token.step_s for token in plain.tokens[1:]]
    if not passes or not steps:
        return None
    checks = [block.verify_s / quiet.forward_s((len(block.tree) or len(block.draft)) + 1) for block in passes]
    return RunCosts(statistics.median(steps), statistics.median(checks), quiet)


@dataclass(frozen=True)
class Repeats:
    """One request's speedups over several runs of each side, alternately, in run order. One run's figure moves
    with whatever else the machine did meanwhile (0.84x to 1.74x was seen for one example on 2 cores), while its
    tokens per pass do not: the figure to show is the median, with the range beside it."""

    speedups: tuple[float, ...]
    runs: tuple[int, ...] = ()  # the run (0-based) each speedup is of, when some runs were left out (`of`)

    @classmethod
    def of(cls, runs: list[tuple[Metrics, Metrics]], disturbed: frozenset[int] = frozenset()) -> Repeats | None:
        """The speedups of `runs` (ours and plain decoding's metrics, a pair a run) that the machine did not
        starve (`Metrics.busy`) or slow (`disturbed`: the runs, 0-based, whose `RunCosts` were far), which measure
        its other work, or of all when it disturbed every one; None when none has a speedup."""
        quiet = [index for index, sides in enumerate(runs)
                 if index not in disturbed and not any(m.busy for m in sides)] or range(len(runs))
        timed = [(index, speedup) for index in quiet if (speedup := decode_speedup(*runs[index])) is not None]
        return cls(tuple(s for _, s in timed), tuple(i for i, _ in timed)) if timed else None

    @property
    def median_run(self) -> int:
        """The run (0-based) whose speedup is the median, the lower middle one of an even count: its timings are
        the ones shown, so that every figure shown is one run's."""
        order = sorted(range(len(self.speedups)), key=self.speedups.__getitem__)
        middle = order[(len(order) - 1) // 2]
        return self.runs[middle] if self.runs else middle

    @property
    def median(self) -> float:
        return sorted(self.speedups)[(len(self.speedups) - 1) // 2]

    @property
    def low(self) -> float:
        return min(self.speedups)

    @property
    def high(self) -> float:
        return max(self.speedups)


def repeats_record(spread: Repeats | None, asked: int, finished: int, differing: Sequence[int]) -> dict:
    """A request's repeats as a record (the page's JSON download and the command line's `--json` alike), runs
    numbered from 1: how many were asked and finished both sides, the speedups of those the machine left alone
    and their runs, the median run (whose figures the record's are), and the runs whose answers differed."""
    return {"asked": asked, "finished": finished, "speedups": list(spread.speedups) if spread else [],
            "runs": [run + 1 for run in spread.runs] if spread else [],
            "median_run": spread.median_run + 1 if spread else None, "differing": list(differing)}


def differing_runs(answers: list[tuple[list[int], ...]]) -> list[int]:
    """The runs (numbered from 1) whose answers, side by side (ours, plain decoding's), are not run 1's: decoding
    one request greedily gives the same tokens every time, so each one named is a bug."""
    return [run for run, sides in enumerate(answers, start=1) if sides != answers[0]]
