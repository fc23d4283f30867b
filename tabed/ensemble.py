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

import torch

from .errors import InputError
from .spec import RULES

_EPS = 1e-12
HEDGE_CLIP = 10.0  # nats: a log-loss above this counts as the worst loss
_DENSE_LIMIT = 1 << 22  # up to this many positions x candidates x vocabulary, w-grid uses the full vocabulary


def simplex_grid(k: int, step: float = 0.1) -> torch.Tensor:
    """All weight vectors on the K-simplex with the given step (11 for K=2, 286 for K=4 at 0.1)."""
    units = round(1.0 / step)
    rows = [c for c in itertools.product(range(units + 1), repeat=k) if sum(c) == units]
    return torch.tensor(rows, dtype=torch.float32) / units


def kl_divergence(p: torch.Tensor, q: torch.Tensor, log_q: torch.Tensor | None = None) -> torch.Tensor:
    """KL(p ‖ q) over the last axis; terms with p = 0 contribute nothing. Give `log_q` (a log-softmax)
    where there is one: the log of a probability that underflowed is not recoverable from q."""
    if log_q is None:
        log_q = torch.log(q.clamp_min(_EPS))
    return (torch.xlogy(p, p) - p * log_q).sum(dim=-1)


def hedge_rate(num_methods: int, horizon: int) -> float:
    """Hedge's learning rate for losses in [0, 1] over `horizon` positions: sqrt(8 ln K / T)."""
    return math.sqrt(8.0 * math.log(num_methods) / max(1, horizon))


def hedge_losses(p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """Each method's log-loss against the target at each position, (n, K): the cross-entropy of its
    distribution under the target's, in nats, clipped to HEDGE_CLIP and scaled to [0, 1]."""
    cross_entropy = -(p[:, None, :] * log_q.clamp_min(-1e4)).sum(dim=-1)
    return cross_entropy.clamp(0.0, HEDGE_CLIP) / HEDGE_CLIP


def tv_distance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return 0.5 * (p - q).abs().sum(dim=-1)


def uniform_weights(k: int) -> torch.Tensor:
    return torch.full((k,), 1.0 / k)


class WeightHistory:
    """Past (p, q_1..q_K) statistics over a window of verified positions, and the weights they give.

    `window` = h positions kept (0 keeps all). Before any history the weights are uniform.
    """

    def __init__(self, num_methods: int, rule: str = "w-grid", window: int = 0, horizon: int = 128) -> None:
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
        self._rows: deque[torch.Tensor] = deque(maxlen=window or None)
        self._total: torch.Tensor | None = None  # the sum of the rows in the window

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def needs_log_q(self) -> bool:
        """Whether `add` wants each method's log-softmax (kld and hedge measure log-losses)."""
        return self.rule in ("kld", "hedge")

    def add(self, p: torch.Tensor, q: torch.Tensor, log_q: torch.Tensor | None = None) -> None:
        """Record verified positions: p (n, V) target distributions, q (n, K, V) per-method ones and,
        for the log-loss rules, their log-softmax log_q (n, K, V) (the log of q where not given)."""
        if p.shape[0] == 0:
            return
        p = p.float()
        q = q.float()
        if self.needs_log_q:
            log_q = torch.log(q.clamp_min(_EPS)) if log_q is None else log_q.float()
        if self.rule == "kld":
            stats = kl_divergence(p[:, None, :], q, log_q)  # (n, K)
        elif self.rule == "hedge":
            stats = hedge_losses(p, log_q)  # (n, K)
        elif self.rule == "tvd":
            stats = tv_distance(p[:, None, :], q)
        else:
            stats = self._grid_stats(p, q)  # (n, G, 2)
        if not self.window:  # everything is kept: one sum (on the device: no copy back, no wait for the GPU)
            self._rows.extend(stats)
            self._total = stats.sum(dim=0) if self._total is None else self._total + stats.sum(dim=0)
            return
        for row in stats:
            if len(self._rows) == self.window:
                self._total = self._total - self._rows[0]
            self._rows.append(row)
            self._total = row.clone() if self._total is None else self._total + row

    def _grid_stats(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """Per position and grid candidate: [top-1 matches the target's, KL(p ‖ mix)]."""
        if q.device not in self._grids:
            self._grids[q.device] = self.grid.to(q.device)
        grid = self._grids[q.device]
        if p.shape[0] * grid.shape[0] * p.shape[-1] <= _DENSE_LIMIT:
            return grid_stats_dense(grid, p, q)
        return grid_stats_by_position(grid, p, q)

    def weights(self) -> torch.Tensor:
        """The weights for the next block, (K,) summing to 1, on the device of the history."""
        if not self._rows:
            return uniform_weights(self.num_methods)
        total = self._total
        if self.rule in ("kld", "tvd"):
            inverse = 1.0 / (total + 1e-6)
            return inverse / inverse.sum()
        if self.rule == "hedge":
            return torch.softmax(-self.rate * total, dim=0)
        matches, kls = total[:, 0], total[:, 1]
        best = matches == matches.max()
        kls = torch.where(best, kls, torch.full_like(kls, float("inf")))
        grid = self._grids.get(total.device, self.grid)
        return grid[kls.argmin()].clone()  # the first of equal minima, as the official code's ties


def grid_stats_dense(grid: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """w-grid statistics on the full vocabulary, every position at once: exact, for small G x V."""
    mixed = torch.einsum("gk,nkv->ngv", grid, q)  # (n, G, V)
    match = (mixed.argmax(dim=-1) == p.argmax(dim=-1, keepdim=True)).float()
    return torch.stack([match, kl_divergence(p[:, None, :], mixed)], dim=-1)


def grid_stats_by_position(grid: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The dense statistics one position at a time, for a large G x V (286 candidates x 32000 tokens:
    ~15 ms a position on two CPU cores, next to a 7B verify's seconds; microseconds on a GPU)."""
    return torch.cat([grid_stats_dense(grid, p[i:i + 1], q[i:i + 1]) for i in range(p.shape[0])])


def ensemble(q: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The weighted average of per-method distributions q (K, V) with weights (K,)."""
    return weights.to(q.device, q.dtype) @ q
