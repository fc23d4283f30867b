"""The faster of two ways to multiply a decoding step's few token rows by a weight matrix, on a CPU, per row count.

A linear layer computes x·Wᵀ. For the one to eight rows of a decoding step, some CPUs' BLAS runs this far
slower than the same product written W·xᵀ, and slowest of all for one row, which it takes as a
matrix-vector product. Which way is faster depends on the row count: measured on a 2-core AMD EPYC with
PyTorch's MKL, over the teaching target's token-path layers, one row 4.7 ms either way (W·xᵀ with the row
written twice: a matrix product, not a matrix-vector one), two rows 7.0 ms as x·Wᵀ and 3.7 as W·xᵀ, four
rows 8.8 and 3.6, six rows 7.0 and 6.0 (the fastest of 40 rounds each). A plain step is one row, a drafter
step one per drafting row, a verify one per draft and one more: timed at one and six rows only, the two
ways looked alike and the library's was kept, while a speculative run's verifies paid twice what they
could. So on a CPU each model's token-path linear layers (`token_linears`) are timed both ways at every
row count up to `WEIGHT_FIRST_ROWS` when the pair loads (about a second for the teaching pair), and become
`WeightFirstLinear` (the same parameters, the same function up to the rounding of a different summation
order) for the row counts where that is clearly faster. Plain and speculative decoding run the same
layers, so the baseline gains what the speculative loop gains.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ModelLoadError
from .caches import text_path

PATHS = ("auto", "library", "weight-first")  # how a pair's linear layers multiply ($TABED_LINEAR)
WEIGHT_FIRST_ROWS = 8  # more rows (a long verify, a prefill) go the library's way, faster there from about 10
TIMED_ROWS = tuple(range(1, WEIGHT_FIRST_ROWS + 1))  # every row count weight-first may take
ROUNDS = 5  # interleaved timing rounds; the fastest of each way's are compared
CLEARLY_FASTER = 0.85  # weight-first is taken below this share of the library's time


class WeightFirstLinear(nn.Linear):
    """A linear layer computed as W·xᵀ for the row counts in `rows`, with one row written twice, and the
    library's way for any other count (`matmul.py` says why)."""

    rows: frozenset[int] = frozenset(TIMED_ROWS)

    @classmethod
    def of(cls, linear: nn.Linear, rows: tuple[int, ...] = TIMED_ROWS) -> WeightFirstLinear:
        """The same layer, sharing `linear`'s parameters (a tied output head stays tied), W·xᵀ for `rows`."""
        layer = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        layer.weight = linear.weight
        if linear.bias is not None:
            layer.bias = linear.bias
        layer.rows = frozenset(rows)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        count = x.numel() // self.in_features
        if count not in self.rows:
            return F.linear(x, self.weight, self.bias)
        rows = x.reshape(count, self.in_features).contiguous()
        if count == 1:
            rows = torch.cat([rows, rows])
        # row-major out, as x·Wᵀ's: the product's transposed view would make the next layer's rows column-major,
        # which MKL multiplies three times slower (a 1536-wide layer over 2 rows: 383 µs against 122)
        out = torch.mm(self.weight, rows.t())[:, :count].t().contiguous()
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


@dataclass(frozen=True)
class LinearChoice:
    """How one model's token-path linear layers multiply, and the timings that chose it (ms for all of them,
    summed over `TIMED_ROWS`; 0 where nothing was timed)."""

    path: str  # "library" (x·Wᵀ) or "weight-first" (W·xᵀ, for the row counts in `rows`)
    library_ms: float = 0.0
    weight_first_ms: float = 0.0
    rows: tuple[int, ...] = ()  # with "weight-first": the row counts multiplied as W·xᵀ (empty: all of TIMED_ROWS)

    @property
    def weight_first_rows(self) -> tuple[int, ...]:
        """The row counts multiplied as W·xᵀ."""
        if self.path != "weight-first":
            return ()
        return self.rows or TIMED_ROWS

    def describe(self) -> str:
        rows = self.weight_first_rows
        order = "x·Wᵀ" if not rows else "W·xᵀ" if rows == TIMED_ROWS else \
            f"W·xᵀ for {_spans(rows)} rows, x·Wᵀ otherwise"
        if not self.library_ms:
            return order
        return f"{order} ({self.weight_first_ms:.1f} ms as W·xᵀ, {self.library_ms:.1f} ms as x·Wᵀ)"


def _spans(counts: tuple[int, ...]) -> str:
    """Row counts as runs: (1, 2, 3, 5) -> "1-3, 5"."""
    runs: list[list[int]] = []
    for count in counts:
        if runs and count == runs[-1][-1] + 1:
            runs[-1].append(count)
        else:
            runs.append([count])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def linear_path() -> str:
    """$TABED_LINEAR: "auto" (the default: time both orders on a CPU), "library" or "weight-first" (to
    reproduce a figure measured with one of them)."""
    path = os.environ.get("TABED_LINEAR", "").strip().lower() or "auto"
    if path not in PATHS:
        raise ModelLoadError(f"TABED_LINEAR={path!r} is not a way to multiply: choose one of {', '.join(PATHS)}")
    return path


def token_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """The linear layers a token forward runs, by their names in `model`: a LLaVA's language model and output
    head (its vision tower and projector multiply hundreds of rows, where the library's order is fine);
    every linear layer of another model."""
    parts = text_path(model)
    owners = list(parts) if parts else [model]
    names = {id(module): name for name, module in model.named_modules()}
    return {f"{names[id(owner)]}.{name}".strip("."): module for owner in owners
            for name, module in owner.named_modules() if type(module) is nn.Linear}


def _seconds(layers: list[nn.Linear], count: int) -> float:
    """One pass over the layers, `count` rows each."""
    start = time.perf_counter()
    for layer in layers:
        layer(torch.ones(count, layer.in_features, dtype=layer.weight.dtype))
    return time.perf_counter() - start


Timings = dict[int, tuple[float, float]]  # per row count: the library's seconds and weight-first's


@torch.inference_mode()
def time_paths(linears: list[nn.Linear], rounds: int = ROUNDS, counts: tuple[int, ...] = TIMED_ROWS) -> Timings:
    """Per row count, the fastest of `rounds` passes in the library's order and in weight-first's over the
    layers, interleaved round by round (after one round of each to warm the caches). The fastest, not the
    median: a pass is only ever slowed by what else runs, and one load's median once swung the choice (14.9 ms
    against 17.3 ms, where other loads saw 7.5-11 against 13-19)."""
    twins = [WeightFirstLinear.of(linear) for linear in linears]  # the same parameters, not yet in the model
    passes: dict[int, tuple[list[float], list[float]]] = {count: ([], []) for count in counts}
    for round_ in range(rounds + 1):
        for count in counts:
            library, weight_first = _seconds(linears, count), _seconds(twins, count)
            if round_:
                passes[count][0].append(library)
                passes[count][1].append(weight_first)
    return {count: (min(library), min(weight_first)) for count, (library, weight_first) in passes.items()}


def _timed(linears: list[nn.Linear]) -> Timings:
    """`time_paths`, and again three times as long for the row counts where weight-first came out faster but
    not clearly: a busy machine's passes blur the gap (one load saw 15.0 ms against 17.2 where quiet ones see
    7.4-9 against 12-14) and the fastest pass of longer timing is more likely a quiet one."""
    timings = time_paths(linears)
    close = tuple(count for count, (library, weight_first) in timings.items()
                  if CLEARLY_FASTER * library <= weight_first < library)
    if close:
        again = time_paths(linears, 3 * ROUNDS, close)
        for count, (library, weight_first) in again.items():
            timings[count] = (min(timings[count][0], library), min(timings[count][1], weight_first))
    return timings


def choose_linears(model: nn.Module, device: torch.device, path: str = "auto") -> LinearChoice:
    """Put the faster multiplication into `model`'s token-path linear layers, in place: `path` "auto" times
    both ways on a CPU (a GPU keeps the library's), or names one."""
    if path not in PATHS:
        raise ModelLoadError(f"unknown linear path {path!r}: choose one of {', '.join(PATHS)}")
    linears = token_linears(model)
    choice = LinearChoice("library" if path == "auto" else path)
    if path == "auto" and device.type == "cpu" and linears:
        timings = _timed(list(linears.values()))
        faster = tuple(count for count, (library, weight_first) in timings.items()
                       if weight_first < CLEARLY_FASTER * library)
        library, weight_first = (sum(seconds) * 1e3 for seconds in zip(*timings.values(), strict=True))
        choice = LinearChoice("weight-first" if faster else "library", library, weight_first, faster)
    if choice.path == "weight-first":
        for name, linear in linears.items():
            model.set_submodule(name, WeightFirstLinear.of(linear, choice.weight_first_rows))
    return choice
