"""Ensemble weights: static uniform (IbED) and TABED's test-time adaptive rules.

After every verification the target's distributions p at the verified positions are past ground
truth. For each such position we keep only small per-position statistics (KL and TV per method, or
per w-grid candidate: whether its top-1 matched and its KL), never the full distributions, and a running sum
over the window, so that choosing the next block's weights costs one pass over G candidates. All of
it stays on the device the distributions are on: the decoding loop never waits for it.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from typing import Protocol

import torch

from ..errors import InputError
from .spec import RULES

_EPS = 1e-12
LOG_FLOOR = -1e4  # log-probabilities below this (-inf: suppressed tokens) count as this in products with p
HEDGE_CLIP = 10.0  # nats: a log-loss above this counts as the worst loss
# w-grid's mixtures are built for as many positions at once as keep positions x candidates x vocabulary under
# this (fp32 entries; a few such tensors live at once): a CPU's memory is spared, a GPU's launches are.
DENSE_LIMITS = {"cpu": 1 << 22, "cuda": 1 << 25}


def simplex_grid(k: int, step: float = 0.1) -> torch.Tensor:
    """All weight vectors on the K-simplex with the given step (11 for K=2, 286 for K=4 at 0.1)."""
    units = round(1.0 / step)
    rows = [c for c in itertools.product(range(units + 1), repeat=k) if sum(c) == units]
    return torch.tensor(rows, dtype=torch.float32) / units


def safe_log(q: torch.Tensor) -> torch.Tensor:
    """log q, with probabilities that underflowed to 0 counted as 1e-12."""
    return torch.log(q.clamp_min(_EPS))


def kl_divergence(p: torch.Tensor, q: torch.Tensor, log_q: torch.Tensor | None = None) -> torch.Tensor:
    """KL(p ‖ q) over the last axis; terms with p = 0 contribute nothing, also where log q is -inf (a
    suppressed token: 0 x -inf would be NaN). Give `log_q` (a log-softmax) where there is one: the log of
    a probability that underflowed is not recoverable from q."""
    if log_q is None:
        log_q = safe_log(q)
    return (torch.xlogy(p, p) - p * log_q.clamp_min(LOG_FLOOR)).sum(dim=-1)


def hedge_rate(num_methods: int, horizon: int) -> float:
    """Hedge's learning rate for losses in [0, 1] over `horizon` positions: sqrt(8 ln K / T)."""
    return math.sqrt(8.0 * math.log(num_methods) / max(1, horizon))


def hedge_losses(p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """Each method's log-loss against the target at each position, (n, K): the cross-entropy of its
    distribution under the target's, in nats, clipped to HEDGE_CLIP and scaled to [0, 1]."""
    cross_entropy = -(p[:, None, :] * log_q.clamp_min(LOG_FLOOR)).sum(dim=-1)
    return cross_entropy.clamp(0.0, HEDGE_CLIP) / HEDGE_CLIP


def tv_distance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return 0.5 * (p - q).abs().sum(dim=-1)


def uniform_weights(k: int) -> torch.Tensor:
    return torch.full((k,), 1.0 / k)


class SummedStats(Protocol):
    """A running sum of `position_stats` kept elsewhere (`weights_graph.GraphedStats`: a replayed CUDA graph)."""

    total: torch.Tensor
    weights: torch.Tensor

    def start(self, rate: float) -> None: ...

    def add(self, p: torch.Tensor, q: torch.Tensor, log_q: torch.Tensor | None = None) -> None: ...


class WeightHistory:
    """Past (p, q_1..q_K) statistics over a window of verified positions, and the weights they give.

    `window` = h positions kept (0 keeps all). Before any history the weights are uniform.
    `summed`, where given and everything is kept (no window), is a `SummedStats` made for this rule and
    method count: it keeps the sum and the weights on the device, one replayed CUDA graph a block.
    """

    def __init__(self, num_methods: int, rule: str = "w-grid", window: int = 0, horizon: int = 128,
                 summed: SummedStats | None = None) -> None:
        if rule not in RULES:
            raise InputError(f"unknown weight rule {rule!r}: choose one of {', '.join(RULES)}")
        if window < 0:
            raise InputError(f"history window must be >= 0 (0 keeps all), got {window}")
        self.num_methods = num_methods
        self.rule = rule
        self.window = window
        self.grid = simplex_grid(num_methods) if rule == "w-grid" else None
        self.rate = hedge_rate(num_methods, window or horizon) if rule == "hedge" else 0.0
        self._grids: dict[torch.device, torch.Tensor] = {}  # the grid on each device it was used on
        self.summed = summed
        self._graphed = summed is not None and not window
        if self._graphed:
            summed.start(self.rate)
        self._rows: deque[torch.Tensor] = deque(maxlen=window or None)  # with a window: its positions' rows
        self._count = 0  # positions in the window
        self._total: torch.Tensor | None = None  # the sum of the rows in the window
        self._weights: torch.Tensor | None = None  # the weights of the history as it is (None: to compute)

    def __len__(self) -> int:
        return self._count

    @property
    def needs_log_q(self) -> bool:
        """Whether `add` wants each method's log-softmax (kld and hedge measure log-losses)."""
        return self.rule in ("kld", "hedge")

    def add(self, p: torch.Tensor, q: torch.Tensor, log_q: torch.Tensor | None = None) -> None:
        """Record verified positions: p (n, V) target distributions, q (n, K, V) per-method ones and,
        for the log-loss rules, their log-softmax log_q (n, K, V) (the log of q where not given)."""
        self.add_blocks([(p, q, log_q)])

    def add_blocks(self, blocks: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]) -> None:
        """Record several blocks' verified positions (p, q, log_q) as `add` each would, in order: where
        everything is kept, with one pass of the statistics over all their positions (a catch-up owes a
        dozen blocks or more) and each block's sum added in turn."""
        blocks = [block for block in blocks if block[0].shape[0]]
        if not blocks:
            return
        self._weights = None
        if self._graphed:  # the graph keeps the sum and the weights
            for p, q, log_q in blocks:
                self.summed.add(p, q, log_q)
                self._count += p.shape[0]
            return
        p, q, log_q = _joined(blocks)
        rows = position_stats(self.rule, p, q, log_q, self.grid_on(q.device))
        if not self.window:  # everything is kept: one sum (on the device: no copy back, no wait for the GPU)
            for part in rows.split([block[0].shape[0] for block in blocks]):
                self._total = part.sum(dim=0) if self._total is None else self._total + part.sum(dim=0)
            self._count += p.shape[0]
            return
        for row in rows:
            if len(self._rows) == self.window:
                self._total = self._total - self._rows[0]
            self._rows.append(row)
            self._total = row.clone() if self._total is None else self._total + row
        self._count = len(self._rows)

    def grid_on(self, device: torch.device) -> torch.Tensor | None:
        """w-grid's candidates on `device` (moved there once)."""
        if self.grid is not None and device not in self._grids:
            self._grids[device] = self.grid.to(device)
        return self._grids.get(device)

    def total(self) -> torch.Tensor | None:
        """The statistics summed over the window, which the weights come from (None before any)."""
        if not self._count:
            return None
        return self.summed.total if self._graphed else self._total

    def weights(self) -> torch.Tensor:
        """The weights for the next block, (K,) summing to 1, on the device of the history."""
        if not self._count:
            return uniform_weights(self.num_methods)
        if self._graphed:
            return self.summed.weights.clone()  # the graph's buffer changes with the next block
        if self._weights is None:  # computed once per history: while rows rest, blocks go by without adding
            total, grid = self._total, self.grid_on(self._total.device)
            if self.rule == "w-grid" and total.device.type == "cpu":
                self._weights = grid[grid_choice(total.tolist())]
            else:
                self._weights = weights_from(self.rule, total, grid, self.rate)
        return self._weights.clone()


def _joined(blocks: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]],
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The blocks' p, q and log_q as one run of positions; a single block (every block's `add`) as it is,
    uncopied."""
    if len(blocks) == 1:
        return blocks[0]
    p, q = torch.cat([block[0] for block in blocks]), torch.cat([block[1] for block in blocks])
    return p, q, torch.cat([block[2] for block in blocks]) if blocks[0][2] is not None else None


def share_equally(weights: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """The weights with `rows` (methods drafted as one and the same row: with no picture M, T, C and P read
    the same text) sharing their total equally. Their mixture is the same whatever the split, so a rule's
    split of them is a tie broken by order, which a chart would show as learning."""
    shared = weights.clone()
    shared[rows] = weights[rows].mean()
    return shared


def weights_from(rule: str, total: torch.Tensor, grid: torch.Tensor | None = None,
                 rate: float | torch.Tensor = 0.0) -> torch.Tensor:
    """`rule`'s weights from the window's summed statistics: inverse KL or TV (kld, tvd), exponential
    weights at Hedge's `rate` (hedge), or w-grid's candidate with the most top-1 matches and, among
    those, the least KL; only device operations, so that a CUDA graph can hold them."""
    if rule in ("kld", "tvd"):
        inverse = 1.0 / (total + 1e-6)
        return inverse / inverse.sum()
    if rule == "hedge":
        return torch.softmax(-rate * total, dim=0)
    matches, kls = total[:, 0], total[:, 1]
    kls = torch.where(matches == matches.max(), kls, float("inf"))
    # the first of equal minima, as the official code's ties; a 1-d index, which needs no wait for a GPU
    return grid.index_select(0, kls.argmin()[None])[0]


def grid_choice(total: list[list[float]]) -> int:
    """`weights_from`'s w-grid candidate, chosen on the host from the summed statistics as a list (a row of
    top-1 matches and KL per candidate): the most matches, among those the least KL, the first of equal
    ones. On a CPU, about a tenth of the time of the eight device operations a GPU's graph needs."""
    most = max(matches for matches, _ in total)
    return min((kl, index) for index, (matches, kl) in enumerate(total) if matches == most)[1]


def position_stats(rule: str, p: torch.Tensor, q: torch.Tensor, log_q: torch.Tensor | None = None,
                   grid: torch.Tensor | None = None) -> torch.Tensor:
    """What `rule` keeps of each verified position (p (n, V), q (n, K, V)): (n, K) KL, log-loss or TV
    per method, or for w-grid (n, G, 2) per `grid` candidate."""
    p, q = p.float(), q.float()
    if rule in ("kld", "hedge"):
        log_q = safe_log(q) if log_q is None else log_q.float()
    if rule == "kld":
        return kl_divergence(p[:, None, :], q, log_q)
    if rule == "hedge":
        return hedge_losses(p, log_q)
    if rule == "tvd":
        return tv_distance(p[:, None, :], q)
    limit = DENSE_LIMITS.get(q.device.type, DENSE_LIMITS["cpu"])
    return grid_stats_chunked(grid, p, q, max(1, limit // (grid.shape[0] * p.shape[-1])))


def grid_stats_dense(grid: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """w-grid statistics on the full vocabulary, every position at once: exact, for small G x V. The
    mixtures are the large tensor (n x G x V): written once, read by the top-1, logged in place, and read
    by one product with p, which is what a GPU's time goes to."""
    mixed = torch.matmul(grid, q)  # (n, G, V)
    match = (mixed.argmax(dim=-1) == p.argmax(dim=-1, keepdim=True)).float()
    log_mixed = mixed.clamp_min_(_EPS).log_()
    kl = torch.xlogy(p, p).sum(dim=-1, keepdim=True) - torch.matmul(log_mixed, p[:, :, None])[..., 0]
    return torch.stack([match, kl], dim=-1)


def grid_stats_chunked(grid: torch.Tensor, p: torch.Tensor, q: torch.Tensor, positions: int) -> torch.Tensor:
    """The dense statistics `positions` positions at a time: all at once where the mixtures fit (one pass of
    launches on a GPU), down to one at a time for a large G x V on a CPU (286 candidates x 32000 tokens:
    ~15 ms a position on two cores, next to a 7B verify's seconds)."""
    if p.shape[0] <= positions:
        return grid_stats_dense(grid, p, q)
    return torch.cat([grid_stats_dense(grid, p[i:i + positions], q[i:i + positions])
                      for i in range(0, p.shape[0], positions)])


def ensemble(q: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The weighted average of per-method distributions q (K, V), or (K, F, V) at F tree nodes, with
    weights (K,)."""
    return torch.tensordot(weights.to(q.device, q.dtype), q, dims=1)
