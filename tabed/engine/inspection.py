"""What a block decided and why, recorded when a run asks for it (`GenerationConfig.inspect`): at every
draft position the target verified, each method's and the ensemble's top tokens, the target's, and the
test the draft met; and how the history chose a block's weights. A report only: nothing here changes a
draw or a token, and a run that does not inspect computes none of it.

The test at a position, greedy: the draft is kept when it is the target's top-1. Sampling: a draft x of
the ensemble's q is kept when u·q(x) < p(x) for the uniform draw u, that is with probability
min(1, p(x)/q(x)); at the first rejection the target's token is drawn from the residual
norm(max(p − q, 0)). A tree tries a node's children in turn, each against what is left of p.
"""

from __future__ import annotations

import torch

from .drafts import DraftChain, Verdict
from .ensemble import WeightHistory
from .events import Candidate, DraftTest, Position, Top, Tried, WeightUpdate
from .sampling import residual

TOP_K = 5  # the tokens recorded of each distribution
def top_k(probs: torch.Tensor, k: int = TOP_K) -> Top:
    """The `k` likeliest tokens of a distribution (V,), as [[token, probability], …], likeliest first."""
    values, indices = probs.float().topk(min(k, probs.shape[-1]))
    return [[token, prob] for token, prob in zip(indices.tolist(), values.tolist(), strict=True)]


def block_positions(methods: tuple[str, ...], resting: list[str], draft: DraftChain, verdict: Verdict,
                    greedy: bool) -> list[Position]:
    """One `Position` per draft position the target verified (the kept drafts and the first rejected one), in
    order. For a tree, `draft` is the walked chain (its accepted path and the best drafts below) and each test
    lists the children tried at that depth (`tried`)."""
    verified = min(verdict.accepted + 1, len(draft.tokens))
    tried = _tried_by_depth(verdict, verified) if verdict.nodes else None
    positions = []
    for j in range(verified):
        token, p, q = draft.tokens[j], verdict.target_probs[j], draft.mixed_probs[j]
        kept = j < verdict.accepted
        at_depth = tried[j] if tried is not None else None
        if greedy:
            test = DraftTest("greedy", kept, target_top1=int(p.argmax()), tried=at_depth)
        else:  # a chain's draw is its own; a tree's are its children's (`tried`)
            test = DraftTest("sampling", kept, p=float(p[token]), q=float(q[token]),
                             u=verdict.draws[j] if at_depth is None else None, tried=at_depth,
                             residual_token=None if kept else verdict.target_token,
                             residual=None if kept else top_k(verdict.residual if verdict.residual is not None
                                                              else residual(p, q)))
        positions.append(Position(token, {m: top_k(draft.row_probs[j][k]) for k, m in enumerate(methods)
                                          if m not in resting}, top_k(q), top_k(p), test))
    return positions


def _tried_by_depth(verdict: Verdict, depths: int) -> list[list[Tried]]:
    """A tree's tests, per depth along the accepted path: every child of the path's node there, in the
    order tried (sampling: with its draw u and p, q at its token), and whether it was kept."""
    path = [node for node, info in enumerate(verdict.nodes) if info.accepted]  # parents first: in depth order
    draws = {entry["node"]: entry for entry in verdict.tried}  # sampling walks record each test
    out = []
    for depth in range(depths):
        parent = path[depth - 1] if depth else -1
        children = [node for node, info in enumerate(verdict.nodes) if info.parent == parent]
        if draws:
            children = [node for node in children if node in draws]
            children.sort(key=lambda node: draws[node]["order"])
        out.append([Tried(node, verdict.nodes[node].token, verdict.nodes[node].accepted,
                          **({key: draws[node][key] for key in ("u", "p", "q")} if node in draws else {}))
                    for node in children])
    return out


def weight_update(history: WeightHistory, weights: torch.Tensor, shared: list[str] = (), waiting: int = 0,
                  ) -> WeightUpdate | None:
    """How the history chose the `weights` it gives now (None before it has any position): the rule, the
    positions it holds, and per rule what decided — w-grid: each candidate's top-1 matches and KL, the
    candidates with the most matches and the winner among them (the least KL; the first of equal ones);
    kld and tvd: each method's summed divergence (weights ∝ 1 / it); hedge: each method's summed loss
    and the rate (weights ∝ exp(−rate · loss)). `shared`: the methods drafted as one row, which then share
    their total weight equally (`ensemble.share_equally`): `weights` are the block's, after that.
    `waiting`: verified positions not in the history yet, while rows rest (`resting.RestSchedule`)."""
    total = history.total()
    if total is None:
        return None
    total = total.float().cpu()
    chosen = {}
    if history.rule == "w-grid":
        matches, kls = total[:, 0].tolist(), total[:, 1].tolist()
        best = max(matches)
        tied = [index for index, count in enumerate(matches) if count == best]
        chosen = {"candidates": [Candidate([round(w, 6) for w in row], m, k)
                                 for row, m, k in zip(history.grid.tolist(), matches, kls, strict=True)],
                  "most_matches": tied, "winner": min(tied, key=lambda index: (kls[index], index))}
    elif history.rule in ("kld", "tvd"):
        chosen = {"divergence": total.tolist()}
    else:
        chosen = {"loss": total.tolist(), "rate": float(history.rate)}
    return WeightUpdate(history.rule, len(history), weights.tolist(), shared=list(shared) or None, waiting=waiting,
                        **chosen)
