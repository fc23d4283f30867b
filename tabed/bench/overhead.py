"""What batching K drafting rows costs: time of one draft step with K rows against K = 1."""

from __future__ import annotations

import statistics
import time

import torch

from ..engine.drafter import BatchedDrafter, build_rows
from ..engine.session import Clock, TargetSession
from ..engine.speed import StepCosts
from ..engine.tree import NODE_BUDGET, ROOT, DraftTree
from ..models.chat import Turn, blank_question, encode
from ..models.lean import LeanDecoder
from ..models.pair import ModelPair

ROW_SETS = {1: ("M",), 2: ("M", "T"), 4: ("M", "T", "C", "P")}
WARM_STEPS = 2  # each timing's first steps warm up: its median is of the steps after them


def take_path(backend, path: str) -> None:
    """Make a dynamic backend's token forwards go `path`'s way: "lean" (`LeanDecoder`, as they do: a drafter's
    fused), "unfused" (`LeanDecoder` with every projection a product of its own), "library" (transformers'
    language model) or "whole" (the whole LLaVA); a static one has only its own."""
    if path == "lean" or getattr(backend, "lean", None) is None:
        return
    if path == "unfused":
        backend.lean = LeanDecoder(backend.lean.model, head=backend.lean.head)
        return
    backend.lean = None
    if path == "whole":
        backend.text_path = None


def draft_step_seconds(pair: ModelPair, turns: list[Turn], methods: tuple[str, ...], steps: int = 16,
                       nodes: int = 1, fed: int = 1, path: str = "lean") -> float:
    """Median time of one step of a batched drafter with the given rows: `fed` tokens (2: the first step after
    a verify, fed the last kept draft and the target's token), or `nodes` sibling tree nodes (a tree's
    frontier, each seeing only itself), forgotten after each step; through `path` (`take_path`)."""
    prompt = encode(pair.drafter_processor, turns, pair.device, pair.dtype)
    captions = ["a simple picture"] * sum(len(t.images) for t in turns)
    with torch.inference_mode():
        rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, methods, captions)
    drafter = BatchedDrafter(pair.drafter, rows, pair.backend("drafter", len(rows)))
    take_path(drafter.backend, path)
    drafter.prefill()
    clock = Clock(pair.device)
    times, token = [], int(prompt.input_ids[0, -1])
    siblings = list(range(nodes))
    layout = bushy_tree(1, nodes).layout(siblings, siblings, shift=-1) if nodes > 1 else None
    for _ in range(steps):
        start = clock.now()
        if layout is None:
            drafter.step([token] * fed)
        else:
            drafter.step_tree([token] * nodes, layout)
        times.append(clock.now() - start)
        if layout is not None or fed > 1:
            drafter.rollback(nodes if layout is not None else fed)
    return statistics.median(times[WARM_STEPS:])


def bushy_tree(depth: int, width: int) -> DraftTree:
    """A tree of `width` nodes at each of `depth` depths, all children of the depth before's first node:
    the shape of a tree that branches at every position (for timing its forward)."""
    tree = DraftTree()
    for level in range(depth):
        parent = ROOT if level == 0 else (level - 1) * width
        for _ in range(width):
            tree.tokens.append(5)
            tree.parents.append(parent)
            tree.depths.append(level + 1)
    return tree


MEMBER_CHAINS = 3  # the default spec's "members" tree: the ensemble's chain, M's and T's


def member_chains(depth: int, chains: int = MEMBER_CHAINS) -> DraftTree:
    """`chains` chains of `depth` nodes under the root, apart from their first node on: the largest tree the
    "members" policy drafts (no chain agreeing with another), for timing its forward."""
    tree = DraftTree()
    for _ in range(chains):
        for level in range(depth):
            tree.tokens.append(5)
            tree.parents.append(ROOT if level == 0 else len(tree.tokens) - 2)
            tree.depths.append(level + 1)
    return tree


def target_step_seconds(pair: ModelPair, turns: list[Turn], count: int, steps: int = 16,
                        tree: DraftTree | None = None, path: str = "lean") -> float:
    """Median time of one target forward of `count` tokens (1: a plain decoding step; γ + 1: a verify),
    or of the last committed token and a `tree` (a tree's verify), through `path` (`take_path`)."""
    backend = pair.backend("target")
    take_path(backend, path)
    session = TargetSession(backend)
    session.prefill(encode(pair.target_processor, turns, pair.device, pair.dtype))
    clock = Clock(pair.device)
    layout = None
    if tree is not None:
        entries = [ROOT] + list(range(len(tree.tokens)))
        layout, count = tree.layout(entries, entries, shift=0), len(entries)
    times, tokens = [], [5] * count
    for _ in range(steps):
        start = clock.now()
        session.forward(tokens, layout)
        times.append(clock.now() - start)
        session.rollback(count)
    return statistics.median(times[WARM_STEPS:])


QUIET_TOKENS = 6  # the quiet verify's tokens: a block of five drafts and the last token
QUIET_SHARE = 0.95  # on a CPU, a probe that got less of its threads' cores than this shared the machine


def quiet_costs(pair: ModelPair, steps: int = 16) -> StepCosts | None:
    """The target's cost of a plain step and of a verify on this machine now (about 0.39 s for the teaching pair
    on 2 cores), for a run's costs to be held against (`speed.RunCosts`); None when, on a CPU, the probe itself
    got under `QUIET_SHARE` of the cores its torch threads ask (the machine is busy: no quiet costs to be had).
    Measured in the thread, and with the torch threads, the runs use."""
    turns = blank_question()
    wall, cpu = time.perf_counter(), time.process_time()
    step_s = target_step_seconds(pair, turns, 1, steps)
    verify_s = target_step_seconds(pair, turns, QUIET_TOKENS, steps)
    share = (time.process_time() - cpu) / (time.perf_counter() - wall) / torch.get_num_threads()
    if pair.device.type == "cpu" and share < QUIET_SHARE:
        return None
    return StepCosts(step_s, verify_s, QUIET_TOKENS)


def step_costs(pair: ModelPair, turns: list[Turn], gamma: int = 5, steps: int = 16) -> dict[str, float]:
    """Milliseconds of each kind of step, and the decode speedup they allow at a block efficiency τ:
    τ plain steps cost τ·t1; a block costs γ draft steps and one verify. `verify_tree_ms`: the verify of
    the largest tree a block of γ may draft (NODE_BUDGET nodes a depth), what a tree adds at most;
    `draft_treeD_ms`: a draft step over a tree's frontier of D nodes; `target_library_ms`: a plain step through
    transformers' language model instead of `LeanDecoder`. The default spec's "members" tree at its largest
    (three chains of γ apart): `verify_members_ms` its verify, `draft_members_ms` its drafting (a step over
    what the drafter has not seen, then γ − 1 over the three chains' tips) and `members_bound_per_tau` the
    speedup they allow, times τ."""
    costs = {"target_ms": target_step_seconds(pair, turns, 1, steps) * 1e3,
             "target_library_ms": target_step_seconds(pair, turns, 1, steps, path="library") * 1e3,
             "verify_ms": target_step_seconds(pair, turns, gamma + 1, steps) * 1e3,
             "verify_tree_ms": target_step_seconds(pair, turns, 0, steps, bushy_tree(gamma, NODE_BUDGET)) * 1e3}
    for k, methods in ROW_SETS.items():
        costs[f"draft_k{k}_ms"] = draft_step_seconds(pair, turns, methods, steps) * 1e3
    for width in (2, 3):  # a tree's draft step: its frontier of `width` nodes, two rows
        costs[f"draft_tree{width}_ms"] = draft_step_seconds(pair, turns, ROW_SETS[2], steps, width) * 1e3
    block = costs["verify_ms"] + gamma * costs["draft_k2_ms"]
    costs["speedup_bound_per_tau"] = costs["target_ms"] / block  # times τ: the K = 2 speedup bound
    costs["verify_members_ms"] = target_step_seconds(pair, turns, 0, steps, member_chains(gamma)) * 1e3
    costs["draft_members_ms"] = costs["draft_k2_ms"] + (gamma - 1) * costs[f"draft_tree{MEMBER_CHAINS}_ms"]
    costs["members_bound_per_tau"] = costs["target_ms"] / (costs["verify_members_ms"] + costs["draft_members_ms"])
    return costs


ROW_COSTS = {  # what a drafter step's rows are -> how it is run
    "T": (("T",), {}),  # one row without the picture (T alone)
    "M": (("M",), {}),  # one row with the picture's tokens (M alone)
    "T,T": (("T", "T"), {}),  # two rows of the same short text: the second row's own cost
    "M,T": (("M", "T"), {}),  # TABED's default: the T row left-padded to the M row's length
    "T unfused": (("T",), {"path": "unfused"}),  # each projection a product of its own, as the target's
    "M,T unfused": (("M", "T"), {"path": "unfused"}),
    "T library": (("T",), {"path": "library"}),  # through transformers' language model, not `LeanDecoder`
    "M,T library": (("M", "T"), {"path": "library"}),
    "M,T whole": (("M", "T"), {"path": "whole"}),  # through the whole LLaVA, wrapper and all
    "T fed 2": (("T",), {"fed": 2}),  # the first step after a verify: two tokens
    "M,T fed 2": (("M", "T"), {"fed": 2}),
}


def row_costs(pair: ModelPair, turns: list[Turn], steps: int = 16, rounds: int = 3) -> dict[str, float]:
    """Milliseconds of one drafter step for each of ROW_COSTS, rounds interleaved so drift hits every kind:
    where a second row's cost goes (the batch itself, the picture's length, the padding), what transformers'
    Python and the LLaVA wrapper cost, and what the first step after a verify costs."""
    samples: dict[str, list[float]] = {name: [] for name in ROW_COSTS}
    for _ in range(rounds):
        for name, (methods, how) in ROW_COSTS.items():
            samples[name].append(draft_step_seconds(pair, turns, methods, steps, **how))
    return {name: statistics.median(seconds) * 1e3 for name, seconds in samples.items()}


def batching_overhead(pair: ModelPair, turns: list[Turn], steps: int = 16, rounds: int = 3) -> dict[int, float]:
    """Step time of K = 1, 2, 4 rows relative to K = 1, rounds interleaved so drift hits every K."""
    samples: dict[int, list[float]] = {k: [] for k in ROW_SETS}
    for _ in range(rounds):
        for k, methods in ROW_SETS.items():
            samples[k].append(draft_step_seconds(pair, turns, methods, steps))
    seconds = {k: statistics.median(v) for k, v in samples.items()}
    return {k: seconds[k] / seconds[1] for k in ROW_SETS} | {f"seconds_k{k}": s for k, s in seconds.items()}
