"""A block's weight statistics in one replayed CUDA graph.

After each verification the weight history turns the verified positions into per-position statistics
(`ensemble.position_stats`) and adds up the block's. On a GPU that is a dozen small kernels whose
launches cost more than their work: about half a millisecond a block on an H100, a few percent of
decoding. Padded to a fixed number of positions, with the padding rows left out of the sum, the same
computation has one shape, so it is captured once per pair, rule and method count, together with the
running sum and the weights it gives, and replayed: a few copies and one launch a block. Without CUDA
the same padded computation runs eagerly (that is how the tests check it).
"""

from __future__ import annotations

import torch

from ..models.caches import capture_graph
from ..models.pair import ModelPair
from .draft_length import AUTO_CAP
from .ensemble import position_stats, safe_log, simplex_grid, weights_from

GRAPH_LIMIT = 1 << 24  # padded positions x statistics columns x vocabulary worth a graph (K = 2 w-grid: 7.4M)


def worth_a_graph(rule: str, methods: int, vocab: int, positions: int) -> bool:
    """Whether the padded computation stays small: w-grid's candidates grow fast with K (11 for K = 2, 66
    for 3), and a padded block of many candidates costs more than the launches it saves."""
    columns = len(simplex_grid(methods)) if rule == "w-grid" else methods
    return positions * columns * vocab <= GRAPH_LIMIT


class GraphedStats:
    """A weight history's sum of `position_stats` and its weights, blocks of up to `positions` verified
    positions replayed as one CUDA graph; made once per pair, rule and method count, `start`ed by each
    history (one answer at a time uses it, like the pair's static caches)."""

    def __init__(self, rule: str, methods: int, vocab: int, positions: int, device: torch.device,
                 graph: bool = True) -> None:
        self.rule, self.positions = rule, positions
        self.grid = simplex_grid(methods).to(device) if rule == "w-grid" else None
        self.p = torch.zeros(positions, vocab, device=device)
        self.q = torch.zeros(positions, methods, vocab, device=device)
        self.log_q = torch.zeros_like(self.q) if rule in ("kld", "hedge") else None
        self.count = torch.zeros((), dtype=torch.long, device=device)
        self.rate = torch.zeros((), device=device)  # Hedge's learning rate, set by `start`
        self.total = self._summed()  # the window's sum, in place from here on
        self.weights = torch.zeros(methods, device=device)
        # the warm-up's sum is taken back by `start`
        self.graph = capture_graph(self._step)[0] if graph and device.type == "cuda" else None
        self.start(0.0)

    def start(self, rate: float) -> None:
        """A new history: nothing summed yet, and its Hedge rate."""
        self.total.zero_()
        self.rate.fill_(rate)

    def _summed(self) -> torch.Tensor:
        """The statistics of the first `count` rows, summed; the rest (stale or zero) count for nothing,
        whatever they hold (a where, not a product: 0 x inf would be NaN)."""
        rows = position_stats(self.rule, self.p, self.q, self.log_q, self.grid)
        valid = torch.arange(self.positions, device=self.p.device) < self.count
        return torch.where(valid.view(-1, *[1] * (rows.dim() - 1)), rows, 0.0).sum(dim=0)

    def _step(self, block: torch.Tensor | None = None) -> None:
        self.total += self._summed() if block is None else block
        self.weights.copy_(weights_from(self.rule, self.total, self.grid, self.rate))

    @torch.inference_mode()
    def add(self, p: torch.Tensor, q: torch.Tensor, log_q: torch.Tensor | None = None) -> None:
        """Add p (n, V), q (n, K, V) and, for the log-loss rules, log_q (n, K, V) (the log of q where not
        given) to the sum, and update `weights`. A block longer than `positions` is summed eagerly."""
        n = p.shape[0]
        if n > self.positions:
            self._step(position_stats(self.rule, p, q, log_q, self.grid).sum(dim=0))
            return
        self.p[:n].copy_(p)
        self.q[:n].copy_(q)
        if self.log_q is not None:
            self.log_q[:n].copy_(safe_log(q.float()) if log_q is None else log_q)
        self.count.fill_(n)
        if self.graph is None:
            self._step()
        else:
            self.graph.replay()


def graphed_stats(pair: ModelPair, rule: str, methods: int) -> tuple[GraphedStats | None, str | None]:
    """The weight history's block statistics as a replayed CUDA graph, made once per pair, rule and method
    count, for static caches on a GPU where the padded computation stays small; None elsewhere (the
    history sums them eagerly), with a note for the run when the capture failed."""
    if pair.cache != "static" or pair.device.type != "cuda":
        return None, None
    return pair.reused(("stats", rule, methods), lambda: _build_graphed_stats(pair, rule, methods))


def _build_graphed_stats(pair: ModelPair, rule: str, methods: int) -> tuple[GraphedStats | None, str | None]:
    positions = AUTO_CAP + 1  # a default block's verified positions; a longer one is summed eagerly
    if not worth_a_graph(rule, methods, pair.vocab_size, positions):
        return None, None
    try:
        return GraphedStats(rule, methods, pair.vocab_size, positions, pair.device), None
    except RuntimeError as exc:  # a place without graphs: the eager sum
        return None, f"CUDA graph of the weight statistics failed ({str(exc).splitlines()[0]})"
