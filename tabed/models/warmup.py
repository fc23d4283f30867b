"""A pair's cache backends run once before anything is timed: the first kernels of each kind, and with
static caches on a GPU the CUDA graphs of the usual shapes."""

from __future__ import annotations

import torch

from .caches import TREE_GRAPH_TOKENS, TREE_VERIFY_BUCKETS, StaticBackend
from .pair import ModelPair

TREE_STEPS = tuple(range(1, TREE_GRAPH_TOKENS + 1))  # the tree forwards of a drafter's frontier


def warm_backends(pair: ModelPair, gamma: int, rows: tuple[int, ...] = (1, 2)) -> None:
    """Run both models' backends through prefill and forwards: the target's every verify length up to
    γ + 1 tokens and every padded tree size; the drafter's with each of `rows` rows; both, tree steps of up
    to TREE_GRAPH_TOKENS nodes, as a hedged first block's fork takes."""
    ids = torch.tensor([[pair.tokenizer.bos_token_id or 0] * 4], device=pair.device)
    for role, batch, lengths in (("target", 1, range(1, gamma + 2)), *(("drafter", k, (1, 2)) for k in rows)):
        backend = pair.backend(role, batch)
        backend.prefill(torch.ones_like(ids).expand(batch, -1), input_ids=ids.expand(batch, -1))
        for count in lengths:
            backend.forward(ids[:, :1].expand(batch, count))
        if isinstance(backend, StaticBackend) and backend.graphs:  # a fresh prefill: room for the trees' graphs
            backend.prefill(torch.ones_like(ids).expand(batch, -1), input_ids=ids.expand(batch, -1))
            backend.capture_trees(int(ids[0, 0]), TREE_STEPS + (TREE_VERIFY_BUCKETS if role == "target" else ()))
