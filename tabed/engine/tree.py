"""Token trees: several draft paths per block, all verified in one target forward.

A chain drafts one token per position, so when the methods disagree only one of them is tried. A tree
tries more. Every node has an estimated chance of being accepted with its whole path (the ensemble's
probabilities, calibrated by `DraftLength` on this answer's verifications). At each depth the likeliest
nodes (at most `width`, the frontier) go through the drafter together, as tree tokens of its batched
forward: every method's row scores each of them (greedy "ensemble" trees give slots that a depth leaves
empty to the likeliest nodes an earlier depth did not expand). Their children:
- "ensemble" policy: greedy, the likeliest of the frontier's top tokens by the chance of their whole
  path, `width`² a depth, a token beyond a node's top one only where the ensemble gives it at least
  `BRANCH_MIN` (a sure ensemble grows a chain, an unsure one branches; a sure node beside a weak
  sibling gets its runner-ups before the sibling's continuation does); sampling, `width` independent
  draws from the ensemble for each node;
- "methods" policy: up to `width` for each node, the ensemble's top token and each method's own top-1
  where they differ; sampling, one draw from the ensemble and the others from the methods' own
  distributions, by weight;
- "unsure" policy: up to `width` for each node, its top tokens as "ensemble" chooses them, or draws,
  but only where the ensemble's top token has less than `UNSURE` of its probability, so more likely
  wrong than right; elsewhere one child (one draw), as in a chain. It is meant to be cheap (the hedged
  first block is one), so its children are not pooled across the depth;
- "members" policy: no pick by chance at all. The tree is the ensemble's own chain and each drafting (not
  resting) method's own greedy chain, the one it would draft alone from the same start (its row is fed
  its own tokens: tree nodes), merged where they agree: at most one node per chain a depth, whatever the
  width. The target keeps the longest of them it agrees with, so a block keeps at least what each member
  alone, and the mix, would have kept from the same start. Sampling: the ensemble's draw first, then
  each method's top token as a draw of its own from a distribution that is all on it (accepted with the
  target's probability left for it, which leaves the residual exact).
Adaptive drafting deepens the tree while the newest depth's chances add up to the chain's minimum (a
"members" tree: while any of its chains would go on alone).
The target scores the whole tree in one forward, each node seeing only its ancestors, and keeps the
longest path it agrees with: greedy, by following its own argmax; sampling, by recursive rejection
over each node's draws in draw order (SpecInfer's multi-draft rule: accept a draw with probability
min(1, p(x) / q(x)), else p becomes norm(max(p - q, 0)) for the next), which is exact in
distribution whatever the tree's shape, as long as how many draws a node gets is fixed before they
are drawn. Both caches then keep exactly that path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import torch

from ..models.caches import TreeLayout
from .config import GenerationConfig
from .draft_length import DraftLength
from .drafter import BatchedDrafter
from .drafts import ROOT, BlockStart, DraftChain, DraftContext, DraftDistributions, Verdict, unseen_after
from .events import StopReason, TreeNode
from .sampling import is_greedy, logits_to_probs, residual
from .session import TargetSession

BRANCH_MIN = 0.05  # greedy "ensemble" trees: the least ensemble probability of a token beyond the top one
UNSURE = 0.5  # "unsure" trees branch only below this ensemble probability of the top token
NODE_BUDGET = 4  # a block's tree holds at most this many nodes per draft position of its cap (4·γ in all)


@dataclass
class Context:
    """The drafter's opinion after a node (or the root): what the node's children were drawn from."""

    row_probs: torch.Tensor  # (K, V): each method's distribution
    mixed: torch.Tensor  # (V,): the ensemble's
    log_probs: torch.Tensor | None  # (K, V), for the log-loss weight rules
    # greedy "ensemble" and "unsure" trees: the ensemble's top tokens and their probabilities, best first
    ranked: list[tuple[int, float]] = field(default_factory=list)
    # (child, the distribution it was drawn from, None when greedy), in draw order; a token drawn twice
    # names the same child twice
    draws: list[tuple[int, torch.Tensor | None]] = field(default_factory=list)


@dataclass
class DraftTree:
    """One block's drafted tokens as a tree; nodes are numbered parents first (depth by depth, but for
    children of a node an earlier depth left unexpanded, `_spare`)."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)  # 1 under the root
    probs: list[float] = field(default_factory=list)  # the ensemble's probability of the node after its parent
    scores: list[float] = field(default_factory=list)  # the estimated chance that the whole path to it is accepted
    contexts: dict[int, Context] = field(default_factory=dict)  # for every node that has children
    cached: list[int] = field(default_factory=list)  # nodes in the drafter's cache, in cache order
    stop: StopReason = StopReason.FIXED
    resting_rows: list[int] = field(default_factory=list)  # methods whose rows sat out its drafting (no guesses)

    def child(self, parent: int, token: int) -> int | None:
        context = self.contexts.get(parent)
        for node, _ in context.draws if context else ():
            if self.tokens[node] == token:
                return node
        return None

    def add(self, parent: int, token: int, prob: float, chance: float) -> tuple[int, bool]:
        """The child of `parent` with this token (of ensemble probability `prob`, accepted after its
        parent with the estimated `chance`), made if new; and whether it was."""
        known = self.child(parent, token)
        if known is not None:
            return known, False
        self.tokens.append(token)
        self.parents.append(parent)
        self.depths.append(1 if parent == ROOT else self.depths[parent] + 1)
        self.probs.append(prob)
        self.scores.append(chance * (1.0 if parent == ROOT else self.scores[parent]))
        return len(self.tokens) - 1, True

    def path(self, node: int) -> list[int]:
        """The nodes from the root's child down to `node`."""
        nodes = []
        while node != ROOT:
            nodes.append(node)
            node = self.parents[node]
        return nodes[::-1]

    def layout(self, queries: list[int], entries: list[int], shift: int) -> TreeLayout | None:
        """Where `queries` sit and what they see among `entries` (the tree's tokens in the cache, these
        included): each its ancestors and itself; position offsets are depths plus `shift`. None when
        that is a plain sequence (every entry an ancestor of the ones after it), which attention runs
        faster without a mask."""
        if all(self.parents[entry] == before for before, entry in pairwise(entries)):
            return None  # each entry the parent of the next: a path (checked first, as it is the common case)
        paths = []  # each node's path from the root, itself included, as a bitmask: bit 1 + n for node n
        for node, parent in enumerate(self.parents):
            paths.append((1 if parent == ROOT else paths[parent]) | 2 << node)
        lines = [1 if node == ROOT else paths[node] for node in queries]
        bits = [1 << (entry + 1) for entry in entries]
        seen = [[bool(line & bit) for bit in bits] for line in lines]
        first = len(entries) - len(queries)  # query i is entry first + i
        if all(row == [j <= first + i for j in range(len(bits))] for i, row in enumerate(seen)):
            return None
        visible = torch.tensor(seen, dtype=torch.bool)
        offsets = torch.tensor([0 if node == ROOT else self.depths[node] + shift for node in queries])
        return TreeLayout(offsets, visible)

    def best_below(self, node: int) -> list[int]:
        """The most probable drafted continuation under `node`."""
        nodes = []
        while (context := self.contexts.get(node)) is not None and context.draws:
            node = max({child for child, _ in context.draws}, key=self.scores.__getitem__)
            nodes.append(node)
        return nodes

    def as_draft(self, nodes: list[int]) -> DraftChain:
        """A path of the tree as a chain, with the distributions each of its tokens was drafted from."""
        contexts = [self.contexts[self.parents[node]] for node in nodes]
        return DraftChain([self.tokens[node] for node in nodes], [c.row_probs for c in contexts],
                     [c.mixed for c in contexts],
                     [c.log_probs for c in contexts] if contexts and contexts[0].log_probs is not None else [],
                     stop=self.stop)


def draft_tree(drafting: DraftContext, gamma: int, width: int, policy: str,
               chain: DraftChain | None = None) -> DraftTree:
    """A tree at most γ deep: one drafter forward per depth, over that depth's frontier (the nodes most
    likely to be accepted, by the draft length's calibration; greedy "ensemble" trees fill the slots a
    depth leaves empty from the nodes earlier depths left unexpanded). With adaptive drafting it stops
    deepening once the target is unlikely to accept any of the newest depth's nodes (at most one of them
    can be: the chances add up), which is the chain's rule when a depth has one node. The first block's
    tree rides on the prompt's pass, where the image placeholder (`drafting.banned`) must not be drafted.
    An end token is a leaf: nothing after it could be emitted. `chain`: this block's drafts so far, a
    chain that stopped where the ensemble was first unsure (`draft_block`'s fork), which the tree grows
    on from."""
    tree = DraftTree(stop=StopReason.CAP if drafting.adaptive else StopReason.FIXED,
                     resting_rows=list(drafting.drafter.resting_rows))
    if chain is not None:  # its block has begun: the drafter has been fed all of it
        frontier, logits = [_graft(tree, chain, drafting.length, drafting.config)], chain.fork_logits[:, None]
    else:
        drafting.start_length()
        frontier, logits = [ROOT], drafting.opening_logits()[:, None]
    growth = _MemberChains(drafting, tree, gamma) if policy == "members" else _TreeGrowth(
        drafting, tree, gamma, width, policy)
    for depth in range(len(tree.tokens) + 1, gamma + 1):
        born = growth.depth(frontier, logits)
        if growth.unsure(born) and depth < gamma:
            tree.stop = StopReason.UNSURE
            break
        if len(tree.tokens) >= growth.budget and depth < gamma:
            tree.stop = StopReason.NODES
            break
        if depth == gamma:
            break
        frontier = growth.frontier(born)
        if not frontier:
            tree.stop = StopReason.EOS
            break
        layout = tree.layout(frontier, tree.cached + frontier, shift=-1)  # the tree starts after the pending tokens
        logits = drafting.drafter.step_tree([tree.tokens[n] for n in frontier], layout)
        tree.cached += frontier
    return tree


class _TreeGrowth:
    """How `draft_tree` grows a tree's depths: each frontier node's children, and the next frontier."""

    def __init__(self, drafting: DraftContext, tree: DraftTree, gamma: int, width: int, policy: str) -> None:
        self.drafting, self.tree, self.gamma, self.width, self.policy = drafting, tree, gamma, width, policy
        self.distributions = drafting.distributions()
        self.order = drafting.weights.argsort(descending=True).tolist()  # the methods by weight ("methods")
        self.budget = NODE_BUDGET * gamma
        greedy = is_greedy(drafting.config.temperature)
        self.pooled = greedy and policy == "ensemble"  # a depth's children chosen together (`_likeliest_children`)
        self.ranked = (width * width if self.pooled else width) if greedy and policy in ("ensemble", "unsure") else 0

    def depth(self, frontier: list[int], logits: torch.Tensor) -> list[int]:
        """The children of every frontier node, drafted from the rows' logits after them; returns the new nodes."""
        tree, born = self.tree, []
        contexts = _contexts(self.distributions, logits, tree, frontier, self.ranked)
        children = (_likeliest_children(tree, frontier, contexts, min(self.ranked, self.budget - len(tree.tokens)),
                                        self.drafting.length) if self.pooled else None)
        for column, (parent, context) in enumerate(zip(frontier, contexts, strict=True)):
            tree.contexts[parent] = context
            draws = children[column] if children is not None else _draws(
                context, min(self.width, self.budget - len(tree.tokens)), self.policy, self.order,
                self.drafting.config, self.drafting.generator)
            for token, proposal, prob in draws:
                node, new = tree.add(parent, token, prob, _chance(self.drafting.length, prob))
                context.draws.append((node, proposal))
                born += [node] if new else []
        return born

    def unsure(self, born: list[int]) -> bool:
        """Adaptive drafting: whether the target is unlikely to accept any of the newest depth's nodes (at
        most one of them can be: their paths' chances add up)."""
        length = self.drafting.length
        return self.drafting.adaptive and not length.keep_growing(sum(self.tree.scores[n] for n in born))

    def frontier(self, born: list[int]) -> list[int]:
        """The next depth's frontier: the likeliest new nodes that are not end tokens, and for greedy "ensemble"
        trees the slots they leave empty filled from nodes earlier depths left unexpanded (`_spare`)."""
        ends, tree = self.drafting.ends, self.tree
        frontier = _likeliest([node for node in born if tree.tokens[node] not in ends], tree, self.width)
        if self.pooled and len(frontier) < self.width:
            floor = self.drafting.length.threshold if self.drafting.adaptive else 0.0
            frontier += _likeliest(_spare(tree, frontier, self.gamma, ends, floor), tree, self.width - len(frontier))
        return frontier


ENSEMBLE = -1  # a "members" tree's chain of the ensemble's tokens (a method's chain is named by its row)


class _MemberChains:
    """How `draft_tree` grows a "members" tree: each chain (the ensemble's, every drafting method's) gains
    a node a depth under its own tip, the same node where chains agree. A chain ends at an end token, and
    with adaptive drafting where it would stop alone: once its own chance of being accepted whole (each of
    its tokens' probability under its own member, calibrated as the ensemble's are) falls below the block's
    minimum. The tree stops growing when its last chain does."""

    def __init__(self, drafting: DraftContext, tree: DraftTree, gamma: int) -> None:
        self.drafting, self.tree = drafting, tree
        self.distributions = drafting.distributions()
        resting = set(drafting.drafter.resting_rows)
        members = [k for k in range(drafting.method_count) if k not in resting]
        self.tips = dict.fromkeys([ENSEMBLE, *members], ROOT)  # each growing chain's last node
        self.survival = dict.fromkeys(self.tips, 1.0)  # each chain's chance of being accepted whole
        self.budget = len(self.tips) * gamma  # never the limit: a depth adds a node per chain at most
        self.greedy = is_greedy(drafting.config.temperature)

    def depth(self, frontier: list[int], logits: torch.Tensor) -> list[int]:
        """Every growing chain's next node, under its tip (a frontier node), drafted from the rows' logits
        there. A child is tried once for all the chains that chose it, but for a sampled ensemble's draw,
        which a method's choice of the same token tries again: the target may have some of it left after
        the draw was rejected (a draw all on a token leaves none)."""
        tree, length, born = self.tree, self.drafting.length, []
        contexts = _contexts(self.distributions, logits, tree, frontier, 0)
        picks, probs, own = self._picks(contexts)
        for column, (parent, context) in enumerate(zip(frontier, contexts, strict=True)):
            tree.contexts[parent] = context
            tried = set()
            for member in [member for member, tip in self.tips.items() if tip == parent]:
                token, prob = picks[column][1 + member], probs[column][1 + member]  # ENSEMBLE is column 0
                node, new = tree.add(parent, token, prob, _chance(length, prob))
                self.tips[member] = node
                self.survival[member] *= _chance(length, own[column][1 + member])
                born += [node] if new else []
                sampled = not self.greedy and member == ENSEMBLE
                if sampled or node not in tried:
                    context.draws.append((node, self._proposal(context, token, sampled)))
                if not sampled:
                    tried.add(node)
        return born

    def unsure(self, born: list[int]) -> bool:
        """Adaptive drafting: whether every chain grown at this depth would stop here alone (the block reports
        the best one's chance); those that would are grown no more."""
        if not self.drafting.adaptive:
            return False
        length = self.drafting.length
        best = max(self.survival[member] for member in self.tips)  # not the chains that ended before
        self.tips = {member: tip for member, tip in self.tips.items() if self.survival[member] >= length.threshold}
        return not length.keep_growing(best)

    def frontier(self, born: list[int]) -> list[int]:
        """The growing chains' new tips but end tokens, each once (the ensemble's first)."""
        ends = self.drafting.ends
        self.tips = {member: tip for member, tip in self.tips.items() if self.tree.tokens[tip] not in ends}
        return list(dict.fromkeys(self.tips.values()))

    def _picks(self, contexts: list[Context]) -> tuple[list[list[int]], list[list[float]], list[list[float]]]:
        """At each frontier node, the ensemble's token (its top one, or its draw) and then each method's top
        token, with their ensemble probabilities and their own member's: (F, 1 + K) each, read back once a
        depth."""
        mixed = torch.stack([context.mixed for context in contexts])  # (F, V)
        tops = torch.stack([context.row_probs for context in contexts]).max(-1)  # (F, K)
        ensemble_picks = mixed.argmax(-1) if self.greedy else torch.cat(
            [torch.multinomial(q, 1, generator=self.drafting.generator) for q in mixed])
        picks = torch.cat([ensemble_picks[:, None], tops.indices], dim=1)
        mixed_probs = mixed.gather(1, picks)
        own = torch.cat([mixed_probs[:, :1], tops.values], dim=1)
        return picks.tolist(), mixed_probs.tolist(), own.tolist()

    def _proposal(self, context: Context, token: int, sampled: bool) -> torch.Tensor | None:
        """What a draw was drawn from: nothing when greedy, the ensemble for its draw, else all on `token`."""
        if self.greedy:
            return None
        if sampled:
            return context.mixed
        return torch.zeros_like(context.mixed).index_fill_(0, torch.tensor([token], device=context.mixed.device), 1.0)


def _likeliest(nodes: list[int], tree: DraftTree, count: int) -> list[int]:
    """The `count` nodes most likely to be accepted with their paths, likeliest first."""
    return sorted(nodes, key=tree.scores.__getitem__, reverse=True)[:count]


def _spare(tree: DraftTree, frontier: list[int], gamma: int, ends: frozenset[int], floor: float) -> list[int]:
    """Nodes of earlier depths that were never expanded and could be (not end tokens, under γ deep, with at
    least `floor` chance of their path being accepted): where a depth has fewer nodes than the frontier has
    slots (the likely path drafted an end token, or is sure where the rest is unlikely), the tree grows on
    from the best of them instead, e.g. a third choice that the frontier had no room for."""
    return [node for node in range(len(tree.tokens))
            if node not in tree.contexts and node not in frontier and tree.tokens[node] not in ends
            and tree.depths[node] < gamma and tree.scores[node] >= floor]


def _chance(length: DraftLength | None, prob: float) -> float:
    """The estimated chance that a draft of this ensemble probability is accepted after its parent."""
    return length.acceptance(prob) if length is not None else prob


def _likeliest_children(tree: DraftTree, frontier: list[int], contexts: list[Context], count: int,
                        length: DraftLength | None) -> list[list[tuple[int, None, float]]]:
    """Greedy "ensemble" trees: a depth's children, as each frontier node's list of draws, are the `count`
    likeliest of all its nodes' top tokens, by the chance of their whole path being accepted. A sure node
    with a weak sibling gets its runner-ups before the sibling's continuation does, and an unsure one more
    than `width` where it alone is likely. A token beyond a node's top one needs at least `BRANCH_MIN` of
    the ensemble."""
    candidates = []
    for column, (parent, context) in enumerate(zip(frontier, contexts, strict=True)):
        base = 1.0 if parent == ROOT else tree.scores[parent]
        for rank, (token, prob) in enumerate(context.ranked):
            if rank == 0 or prob >= BRANCH_MIN:
                candidates.append((base * _chance(length, prob), column, token, prob))
    candidates.sort(key=lambda candidate: candidate[0], reverse=True)  # stable: ties stay in frontier order
    children = [[] for _ in frontier]
    for _, column, token, prob in candidates[:max(count, 0)]:
        children[column].append((token, None, prob))
    return children


def _graft(tree: DraftTree, chain: DraftChain, length: DraftLength | None, config: GenerationConfig) -> int:
    """The chain's drafts as the tree's first nodes, each its parent's one child (drawn from the ensemble,
    as a chain's are), all in the drafter's cache; returns the last (the root when there is none)."""
    node, greedy = ROOT, is_greedy(config.temperature)
    for position, (token, prob) in enumerate(zip(chain.tokens, chain.confidences(), strict=True)):
        context = Context(chain.row_probs[position], chain.mixed_probs[position],
                          chain.row_log_probs[position] if chain.row_log_probs else None)
        tree.contexts[node] = context
        node, _ = tree.add(node, token, prob, _chance(length, prob))
        context.draws.append((node, None if greedy else context.mixed))
    tree.cached = list(range(len(chain.tokens)))
    return node


def _contexts(distributions: DraftDistributions, logits: torch.Tensor, tree: DraftTree, frontier: list[int],
              ranked: int) -> list[Context]:
    """The drafter's distributions after each frontier node, from the rows' logits (rows, F, V): all at once,
    unless N looks its guess up in each node's own path; with `ranked`, each one's top tokens under the
    ensemble too, read back together (one wait for a GPU per depth, not two per node)."""
    if distributions.lookup is None:
        q_rows, mixed, log_q = distributions(logits, [])
        found = [(q_rows[:, column], mixed[column], None if log_q is None else log_q[:, column])
                 for column in range(len(frontier))]
    else:
        found = [distributions(logits[:, column], [tree.tokens[n] for n in tree.path(parent)])
                 for column, parent in enumerate(frontier)]
        mixed = torch.stack([q for _, q, _ in found]) if ranked else None
    tops = [[] for _ in frontier]
    if ranked:
        top = mixed.topk(min(ranked, mixed.shape[-1]))
        tops = [list(zip(*pair, strict=True)) for pair in zip(top.indices.tolist(), top.values.tolist(), strict=True)]
    return [Context(*opinion, best) for opinion, best in zip(found, tops, strict=True)]


def _draws(context: Context, count: int, policy: str, order: list[int], config: GenerationConfig,
           generator: torch.Generator) -> list[tuple[int, torch.Tensor | None, float]]:
    """A node's children as (token, the distribution it was drawn from, its ensemble probability), except
    greedy "ensemble" trees' (chosen a depth at a time, `_likeliest_children`); `count` is fixed before any
    is drawn, which keeps the sampling verification exact. Greedy "unsure" children come from the node's
    `ranked` tokens; otherwise the probabilities are read back together: one wait for a GPU per node, not
    one per child."""
    q = context.mixed
    if count <= 0:
        return []
    if policy == "unsure" and (context.ranked[0][1] if context.ranked else float(q.max())) >= UNSURE:
        count = 1  # sure enough: a chain here
    if is_greedy(config.temperature):
        if policy == "methods":
            tokens = [int(q.argmax())] + context.row_probs.argmax(-1)[order].tolist()
            tokens = list(dict.fromkeys(tokens))[:count]
            return [(token, None, prob) for token, prob in zip(tokens, q[tokens].tolist(), strict=True)]
        return [(token, None, prob) for rank, (token, prob) in enumerate(context.ranked[:count])
                if rank == 0 or prob >= BRANCH_MIN]
    proposals = [q] + ([context.row_probs[k] for k in order] if policy == "methods" else [])
    proposals = [proposals[i] if i < len(proposals) else q for i in range(count)]
    tokens = torch.cat([torch.multinomial(p, 1, generator=generator) for p in proposals])
    drawn = tokens.tolist()
    return list(zip(drawn, proposals, q[tokens].tolist(), strict=True))


class TreeVerifier:
    """Verifies a token tree in one target forward and keeps the accepted path in both caches."""

    def __init__(self, methods: tuple[str, ...], start: BlockStart) -> None:
        self.methods, self.start = methods, start

    def verify(self, session: TargetSession, tree: DraftTree, config: GenerationConfig,
               generator: torch.Generator) -> Verdict:
        """The target scores the last committed token and every node (for the first block, the prompt's
        own pass does: `BlockStart.score`); the walk from the root keeps the longest path it accepts. The
        verdict reads as a chain: that path and the best drafts below it."""
        logits = self.start.score(session, tree.tokens, tree.layout)
        probs = logits_to_probs(logits, config.temperature, config.top_p)  # row 1 + n: after node n
        choices = RandomChoices(generator, record=config.inspect)
        if is_greedy(config.temperature):
            path, token = _walk_greedy(tree, logits.argmax(-1).tolist())
        else:
            path, token = _walk_sampling(tree, probs, choices)
        view = path + tree.best_below(path[-1] if path else ROOT)
        return Verdict(len(path), token, probs[[0] + [node + 1 for node in view]], path=tree.as_draft(view),
                       nodes=self._nodes(tree, set(path), probs), tried=choices.tried, residual=choices.residual)

    def _nodes(self, tree: DraftTree, kept: set[int], probs: torch.Tensor) -> list[TreeNode]:
        parents = list(tree.contexts)  # every method's top-1 after each parent (the root at least), read back at once
        top1 = dict(zip(parents, torch.stack([tree.contexts[n].row_probs for n in parents]).argmax(-1).tolist(),
                        strict=True))
        rows, tokens = (torch.tensor(values, device=probs.device) for values in (tree.parents, tree.tokens))
        target = probs[rows + 1, tokens].tolist()  # each node's probability under the target, after its parent
        guessing = [(k, m) for k, m in enumerate(self.methods) if k not in tree.resting_rows]
        return [TreeNode(token, parent, "".join(m for k, m in guessing if top1[parent][k] == token), node in kept,
                         tree.probs[node], target[node])
                for node, (token, parent) in enumerate(zip(tree.tokens, tree.parents, strict=True))]

    def commit(self, session: TargetSession, drafter: BatchedDrafter, tree: DraftTree, verdict: Verdict,
               pending: list[int]) -> list[int]:
        """Both caches keep the accepted path and drop every other branch; returns the committed tokens
        the drafter has not seen yet (`unseen_after`: the path's last node when it was a leaf, and the
        target's token)."""
        kept = [node for node, info in enumerate(verdict.nodes) if info.accepted]
        self.start.keep(session, len(tree.tokens), kept)
        slot = {node: index for index, node in enumerate(tree.cached)}
        slots = [slot[node] for node in kept if node in slot]  # the accepted nodes the drafter was fed
        drafter.keep(len(tree.cached), slots)
        return unseen_after(pending, True, [tree.tokens[node] for node in kept], len(slots), verdict.target_token)


def _walk_greedy(tree: DraftTree, choices: list[int]) -> tuple[list[int], int]:
    """Follow the target's argmax down the tree: the accepted path and the target's token after it."""
    path, at = [], ROOT
    while (child := tree.child(at, choices[at + 1])) is not None:
        path.append(child)
        at = child
    return path, choices[at + 1]


class RandomChoices:
    """The random choices of a sampling walk, drawn from `generator`: a draw x of a proposal q is accepted
    when u·q(x) < p(x) for a uniform u (with probability min(1, p(x)/q(x))); a token is sampled from p
    (weights: they need not sum to 1)."""

    def __init__(self, generator: torch.Generator, record: bool = False) -> None:
        self.generator, self.record = generator, record
        self.tried: list[dict] = []  # with `record`: each test, in order (`inspection.py` reads them)
        self.residual: torch.Tensor | None = None  # with `record`: what the last token was sampled from

    def accepts(self, p_x: torch.Tensor, q_x: torch.Tensor, node: int = ROOT) -> bool:
        u = torch.rand((), generator=self.generator, device=p_x.device)
        kept = bool(u * q_x < p_x)
        if self.record:
            self.tried.append({"node": node, "order": len(self.tried), "u": float(u), "p": float(p_x),
                               "q": float(q_x)})  # whether kept: the tree's accepted path says
        return kept

    def sample(self, p: torch.Tensor) -> int:
        if self.record:
            self.residual = p
        return int(torch.multinomial(p, 1, generator=self.generator))


def _walk_sampling(tree: DraftTree, probs: torch.Tensor, choices: RandomChoices) -> tuple[list[int], int]:
    """Recursive rejection down the tree: at each node its draws are tried in order against the target's
    distribution, which loses each rejected draw's distribution (`residual`); the first accepted draw is
    followed. When none is (or the node is a leaf), the target's token is sampled from what is left."""
    path, at = [], ROOT
    while True:
        p, chosen = probs[at + 1], None
        context = tree.contexts.get(at)
        for node, proposal in context.draws if context else ():
            token = tree.tokens[node]
            if choices.accepts(p[token], proposal[token], node):
                chosen = node
                break
            p = residual(p, proposal)
        if chosen is None:
            return path, choices.sample(p)
        path.append(chosen)
        at = chosen
