"""The faster of two ways to multiply a decoding step's few token rows by a weight matrix, on a CPU.

A linear layer computes x·Wᵀ. For the one to eight rows of a decoding step, some CPUs' BLAS runs this far
slower than the same product written W·xᵀ, and slowest of all for one row, which it takes as a
matrix-vector product. Measured on a 2-core AMD EPYC with PyTorch's MKL, the teaching target's layer
shapes: one row 5.8 ms as x·Wᵀ and 3.2 ms as W·xᵀ (the row written twice: a matrix product, not a
matrix-vector one), two rows 8.2 and 2.4 ms, six rows 7.0 and 4.8 ms. On another CPU the library's own
order may be the faster. So on a CPU each model's token-path linear layers (`token_linears`) are timed
both ways when the pair loads (about a fifth of a second), and become `WeightFirstLinear` (the same
parameters, the same function up to the rounding of a different summation order) only where that is
clearly faster. Plain decoding and speculative decoding run the same layers, so the baseline gains what
the speculative loop gains.
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
TIMED_ROWS = (1, 6)  # a plain step or a drafter step, and a verify of five drafts
ROUNDS = 7  # interleaved timing rounds; the fastest of each way's are compared
CLEARLY_FASTER = 0.85  # weight-first is taken below this share of the library's time
WEIGHT_FIRST_ROWS = 8  # more rows (a long verify, a prefill) go the library's way, faster there from about 10


class WeightFirstLinear(nn.Linear):
    """A linear layer computed as W·xᵀ, with one row written twice (`matmul.py` says why)."""

    @classmethod
    def of(cls, linear: nn.Linear) -> WeightFirstLinear:
        """The same layer, sharing `linear`'s parameters (a tied output head stays tied)."""
        layer = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        layer.weight = linear.weight
        if linear.bias is not None:
            layer.bias = linear.bias
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        count = x.numel() // self.in_features
        if count > WEIGHT_FIRST_ROWS:
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

    path: str  # "library" (x·Wᵀ) or "weight-first" (W·xᵀ)
    library_ms: float = 0.0
    weight_first_ms: float = 0.0

    def describe(self) -> str:
        order = "W·xᵀ" if self.path == "weight-first" else "x·Wᵀ"
        if not self.library_ms:
            return order
        return f"{order} ({self.weight_first_ms:.1f} ms as W·xᵀ, {self.library_ms:.1f} ms as x·Wᵀ)"


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


def _seconds(layers: list[nn.Linear]) -> float:
    """One pass over the layers for every row count in TIMED_ROWS."""
    start = time.perf_counter()
    for count in TIMED_ROWS:
        for layer in layers:
            layer(torch.ones(count, layer.in_features, dtype=layer.weight.dtype))
    return time.perf_counter() - start


@torch.inference_mode()
def time_paths(linears: list[nn.Linear], rounds: int = ROUNDS) -> tuple[float, float]:
    """The fastest of `rounds` passes in the library's order and in weight-first's over the layers, interleaved
    round by round (after one round of each to warm the caches). The fastest, not the median: a pass is only
    ever slowed by what else runs, and one load's median once swung the choice (14.9 ms against 17.3 ms,
    where other loads saw 7.5-11 against 13-19)."""
    twins = [WeightFirstLinear.of(linear) for linear in linears]  # the same parameters, not yet in the model
    _seconds(linears), _seconds(twins)
    library, weight_first = [], []
    for _ in range(rounds):
        library.append(_seconds(linears))
        weight_first.append(_seconds(twins))
    return min(library), min(weight_first)


def _timed(linears: list[nn.Linear]) -> tuple[float, float]:
    """`time_paths`, and again three times as long where weight-first came out faster but not clearly: a busy
    machine's passes blur the gap (one load saw 15.0 ms against 17.2 where quiet ones see 7.4-9 against 12-14)
    and the fastest pass of longer timing is more likely a quiet one."""
    library, weight_first = time_paths(linears)
    if CLEARLY_FASTER * library <= weight_first < library:
        again = time_paths(linears, 3 * ROUNDS)
        library, weight_first = min(library, again[0]), min(weight_first, again[1])
    return library, weight_first


def choose_linears(model: nn.Module, device: torch.device, path: str = "auto") -> LinearChoice:
    """Put the faster multiplication into `model`'s token-path linear layers, in place: `path` "auto" times
    both ways on a CPU (a GPU keeps the library's), or names one."""
    if path not in PATHS:
        raise ModelLoadError(f"unknown linear path {path!r}: choose one of {', '.join(PATHS)}")
    linears = token_linears(model)
    choice = LinearChoice("library" if path == "auto" else path)
    if path == "auto" and device.type == "cpu" and linears:
        library, weight_first = _timed(list(linears.values()))
        faster = weight_first < CLEARLY_FASTER * library
        choice = LinearChoice("weight-first" if faster else "library", library * 1e3, weight_first * 1e3)
    if choice.path == "weight-first":
        for name, linear in linears.items():
            model.set_submodule(name, WeightFirstLinear.of(linear))
    return choice
