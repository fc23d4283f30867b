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
_GRID_TOP = 32  # top tokens of p and of each q_k kept exactly by w-grid
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
        return grid_stats_bucketed(grid, p, q)

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


def grid_stats_bucketed(grid: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """w-grid statistics for a large G x V (e.g. 286 candidates x 32000 tokens).

    Work is done on S, the union of the top tokens of p and of every q_k, plus one bucket for the
    rest, so it costs G x |S| instead of G x V. The top-1 is exact: when a token outside S could
    beat the best in S for some candidate, that position is redone on the full vocabulary. The KL
    of the bucketed distributions is a lower bound of the true KL (equal when the tail is empty);
    it only breaks ties between candidates with the same number of matches.
    """
    top = min(_GRID_TOP, p.shape[-1])
    candidates = torch.cat([p.topk(top, dim=-1).indices, q.topk(top, dim=-1).indices.flatten(1)], dim=1)
    out = []
    for p_i, q_i, cand in zip(p, q, candidates, strict=True):
        support = cand.unique()
        mixed = grid @ q_i[:, support]  # (G, |S|)
        best, arg = mixed.max(dim=-1)
        chosen = support[arg]
        outside = q_i.clone()
        outside[:, support] = 0.0
        if bool((best <= grid @ outside.max(dim=-1).values).any()):
            chosen = (grid @ q_i).argmax(dim=-1)
        match = (chosen == p_i.argmax()).float()
        p_s = p_i[support]
        p_bucketed = torch.cat([p_s, (1.0 - p_s.sum()).clamp_min(0.0)[None]])
        q_bucketed = torch.cat([mixed, (1.0 - mixed.sum(dim=-1, keepdim=True)).clamp_min(0.0)], dim=-1)
        out.append(torch.stack([match, kl_divergence(p_bucketed[None, :], q_bucketed)], dim=-1))
    return torch.stack(out)


def ensemble(q: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The weighted average of per-method distributions q (K, V) with weights (K,)."""
    return weights.to(q.device, q.dtype) @ q
