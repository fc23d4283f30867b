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
from .sampling import residual

TOP_K = 5  # the tokens recorded of each distribution


def top_k(probs: torch.Tensor, k: int = TOP_K) -> list[list]:
    """The `k` likeliest tokens of a distribution (V,), as [[token, probability], …], likeliest first."""
    values, indices = probs.float().topk(min(k, probs.shape[-1]))
    return [[token, prob] for token, prob in zip(indices.tolist(), values.tolist(), strict=True)]


def block_positions(methods: tuple[str, ...], resting: list[str], draft: DraftChain, verdict: Verdict,
                    greedy: bool) -> list[dict]:
    """One entry per draft position the target verified (the kept drafts and the first rejected one), in
    order: `draft`, `methods` ({method: top-k}, the resting ones left out), `ensemble`, `target` (the
    target's distribution there) and `test`. For a tree, `draft` is the walked chain (its accepted path
    and the best drafts below) and each test lists the children tried at that depth (`tried`)."""
    verified = min(verdict.accepted + 1, len(draft.tokens))
    tried = _tried_by_depth(verdict, verified) if verdict.nodes else None
    positions = []
    for j in range(verified):
        token, p, q = draft.tokens[j], verdict.target_probs[j], draft.mixed_probs[j]
        kept = j < verdict.accepted
        test = {"kind": "greedy", "target_top1": int(p.argmax()), "kept": kept} if greedy else {
            "kind": "sampling", "p": float(p[token]), "q": float(q[token]), "kept": kept}
        if tried is not None:
            test["tried"] = tried[j]
        elif not greedy:
            test["u"] = verdict.draws[j]
        if not greedy and not kept:
            test["residual_token"] = verdict.target_token
            test["residual"] = top_k(verdict.residual if verdict.residual is not None else residual(p, q))
        positions.append({"draft": token,
                          "methods": {m: top_k(draft.row_probs[j][k]) for k, m in enumerate(methods)
                                      if m not in resting},
                          "ensemble": top_k(q), "target": top_k(p), "test": test})
    return positions


def _tried_by_depth(verdict: Verdict, depths: int) -> list[list[dict]]:
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
        out.append([{"node": node, "token": verdict.nodes[node].token, "kept": verdict.nodes[node].accepted,
                     **({key: draws[node][key] for key in ("u", "p", "q")} if node in draws else {})}
                    for node in children])
    return out


def weight_update(history: WeightHistory, weights: torch.Tensor, shared: list[str] = (), waiting: int = 0,
                  ) -> dict | None:
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
    choice = {"rule": history.rule, "positions": len(history)}
    if history.rule == "w-grid":
        grid = history.grid
        matches, kls = total[:, 0].tolist(), total[:, 1].tolist()
        best = max(matches)
        tied = [index for index, count in enumerate(matches) if count == best]
        winner = min(tied, key=lambda index: (kls[index], index))
        choice |= {"candidates": [{"weights": [round(w, 6) for w in row], "matches": m, "kl": k}
                                  for row, m, k in zip(grid.tolist(), matches, kls, strict=True)],
                   "most_matches": tied, "winner": winner}
    elif history.rule in ("kld", "tvd"):
        choice["divergence"] = total.tolist()
    else:
        choice |= {"loss": total.tolist(), "rate": float(history.rate)}
    choice["weights"] = weights.tolist()
    if shared:
        choice["shared"] = list(shared)
    if waiting:
        choice["waiting"] = waiting
    return choice
