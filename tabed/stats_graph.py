"""A block's weight statistics in one replayed CUDA graph.

After each verification the weight history turns the verified positions into per-position statistics
(`ensemble.position_stats`) and adds up the block's. On a GPU that is a dozen small kernels whose
launches cost more than their work: about half a millisecond a block on an H100, a few percent of
decoding. Padded to a fixed number of positions, with the padding rows left out of the sum, the same
computation has one shape, so it is captured once per pair, rule and method count and replayed: a
few copies and one launch a block. Without CUDA the same padded computation runs eagerly (that is how
the tests check it).
"""

from __future__ import annotations

import torch

from .ensemble import position_stats, safe_log, simplex_grid

GRAPH_LIMIT = 1 << 24  # padded positions x statistics columns x vocabulary worth a graph (K = 2 w-grid: 7.4M)


def worth_a_graph(rule: str, methods: int, vocab: int, positions: int) -> bool:
    """Whether the padded computation stays small: w-grid's candidates grow fast with K (11 for K = 2, 66
    for 3), and a padded block of many candidates costs more than the launches it saves."""
    columns = len(simplex_grid(methods)) if rule == "w-grid" else methods
    return positions * columns * vocab <= GRAPH_LIMIT


class GraphedStats:
    """Sums `position_stats` of up to `positions` verified positions at a time."""

    def __init__(self, rule: str, methods: int, vocab: int, positions: int, device: torch.device,
                 graph: bool = True) -> None:
        self.rule, self.positions = rule, positions
        self.grid = simplex_grid(methods).to(device) if rule == "w-grid" else None
        self.p = torch.zeros(positions, vocab, device=device)
        self.q = torch.zeros(positions, methods, vocab, device=device)
        self.log_q = torch.zeros_like(self.q) if rule in ("kld", "hedge") else None
        self.count = torch.zeros((), dtype=torch.long, device=device)
        self.out = self._summed()  # also the eager warm-up a capture needs
        self.graph = self._capture() if graph and device.type == "cuda" else None

    def _summed(self) -> torch.Tensor:
        """The statistics of the first `count` rows, summed; the rest (stale or zero) count for nothing,
        whatever they hold (a where, not a product: 0 x inf would be NaN)."""
        rows = position_stats(self.rule, self.p, self.q, self.log_q, self.grid)
        valid = torch.arange(self.positions, device=self.p.device) < self.count
        return torch.where(valid.view(-1, *[1] * (rows.dim() - 1)), rows, 0.0).sum(dim=0)

    def _capture(self) -> torch.cuda.CUDAGraph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self._summed()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.out = self._summed()
        return graph

    @torch.inference_mode()
    def __call__(self, p: torch.Tensor, q: torch.Tensor, log_q: torch.Tensor | None = None) -> torch.Tensor | None:
        """The summed statistics of p (n, V), q (n, K, V), log_q (n, K, V) for the log-loss rules (the
        log of q where not given); valid until the next call. None when n is over `positions`."""
        n = p.shape[0]
        if n > self.positions:
            return None
        self.p[:n].copy_(p)
        self.q[:n].copy_(q)
        if self.log_q is not None:
            self.log_q[:n].copy_(safe_log(q.float()) if log_q is None else log_q)
        self.count.fill_(n)
        if self.graph is None:
            return self._summed()
        self.graph.replay()
        return self.out
