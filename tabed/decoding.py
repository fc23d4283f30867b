"""Speculative decoding with an ensemble of batched drafts, and the plain autoregressive baseline.

Both are generators of events (see `events.py`); closing the generator or setting `stop` ends the
run between blocks (or tokens) with a final `Finished` event. Each block drafts (a chain, `chain.py`,
or a token tree, `tree.py`), verifies in one target forward, and records; the first block's drafts
ride on the target's pass over the prompt, which also gives the answer's first token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from . import conversation
from .backends import TREE_GRAPH_TOKENS, TREE_VERIFY_BUCKETS, StaticBackend, TreeLayout
from .captioning import Captioner, captioner_for
from .chain import ChainVerifier, Draft, Verdict, cut_draft, draft_block
from .draft_length import AUTO_CAP, DraftLength
from .drafter import BatchedDrafter, build_rows, image_token_id
from .ensemble import WeightHistory, uniform_weights
from .errors import InputError
from .events import BlockEvent, Event, Finished, GenerationResult, Metrics, Started, TokenEvent
from .lookup import NgramLookup
from .models import ModelPair
from .resting import Resting
from .sampling import choose_token, logits_to_probs
from .spec import RULES, DraftingSpec
from .tree import HEDGE_WIDTH, TREE_BLOCKS, TREE_POLICIES, UNSURE, DraftTree, TreeVerifier, draft_tree


@dataclass
class GenerationConfig:
    """Decoding settings shared by speculative and autoregressive decoding."""

    max_new_tokens: int = 128
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int = 0
    gamma: int = AUTO_CAP  # draft tokens per block: the cap when adaptive, else the fixed length
    adaptive: bool = True  # stop a block's draft early when the ensemble is unsure (see draft_length.py)
    rule: str = "w-grid"  # TABED weight rule: w-grid, kld, tvd or hedge
    window: int = 0  # TABED history window in positions, 0 = all
    tree_width: int = 1  # 1: a chain of drafts; D > 1: token trees, D nodes expanded per depth (see tree.py)
    tree_policy: str = "ensemble"  # how a tree node's children are chosen: "ensemble", "methods" or "unsure"
    tree_blocks: str = "all"  # which blocks draft trees: "all", or "first" (the one drafted with no weights learned)
    hedge_first: bool = True  # with chains: TABED's first block forks where it is unsure (`hedged_first`)
    resting: bool = True  # a method at weight 0 for a while leaves the draft steps (see resting.py)

    def __post_init__(self) -> None:
        if not 1 <= self.max_new_tokens <= 4096:
            raise InputError(f"max new tokens must be between 1 and 4096, got {self.max_new_tokens}")
        if not 1 <= self.gamma <= 64:
            raise InputError(f"gamma (draft length) must be between 1 and 64, got {self.gamma}")
        if not 0.0 <= self.temperature <= 10.0:
            raise InputError(f"temperature must be between 0 and 10, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise InputError(f"top-p must be in (0, 1], got {self.top_p}")
        if self.rule not in RULES:
            raise InputError(f"unknown weight rule {self.rule!r}: choose one of {', '.join(RULES)}")
        if not 1 <= self.tree_width <= 4:
            raise InputError(f"tree width must be between 1 (a chain) and 4, got {self.tree_width}")
        if self.tree_policy not in TREE_POLICIES:
            raise InputError(f"unknown tree policy {self.tree_policy!r}: choose one of {', '.join(TREE_POLICIES)}")
        if self.tree_blocks not in TREE_BLOCKS:
            raise InputError(f"unknown tree blocks {self.tree_blocks!r}: choose one of {', '.join(TREE_BLOCKS)}")
        if self.window < 0:
            raise InputError(f"history window must be >= 0 (0 keeps all), got {self.window}")


class Clock:
    """Wall time that waits for queued GPU work, so each phase is charged what it really cost; and the
    process's CPU time, which tells a run that had its cores from one that shared them."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.start = self.now()
        self.cpu_start = time.process_time()

    def cpu_share(self) -> float:
        """CPU seconds this process got per second of wall time since the start: about its number of
        busy threads on an idle CPU, a fraction of that when other processes were using the cores."""
        wall = self.now() - self.start
        return (time.process_time() - self.cpu_start) / wall if wall > 0 else 0.0

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def elapsed(self) -> float:
        return self.now() - self.start


class TargetSession:
    """The target with its cache backend: prefill, score new tokens, roll back rejected ones."""

    def __init__(self, backend) -> None:
        self.backend = backend

    def prefill(self, prompt: conversation.EncodedPrompt, drafts: list[int] = (),
                layout: TreeLayout | None = None) -> torch.Tensor:
        """The prompt's pass, with any draft tokens after it (a chain, or a tree laid out by `layout`):
        logits (len(drafts) + 1, V), the first scoring the answer's first token."""
        ids = prompt.input_ids
        if drafts:
            ids = torch.cat([ids, torch.tensor([list(drafts)], dtype=ids.dtype, device=ids.device)], dim=1)
        mask = torch.ones_like(ids)
        return self.backend.prefill(mask, keep=len(drafts) + 1, layout=layout, input_ids=ids,
                                    **prompt.image_inputs)[0]

    def forward(self, tokens: list[int], layout: TreeLayout | None = None) -> torch.Tensor:
        """Logits (len(tokens), V): position i scores the token after tokens[i] (after token i of a tree
        laid out by `layout`)."""
        device = self.backend.model.device
        return self.backend.forward(torch.tensor([tokens], dtype=torch.long, device=device), layout)[0]

    def rollback(self, count: int) -> None:
        self.backend.rewind(count)

    def keep(self, count: int, offsets: list[int]) -> None:
        """Of the last `count` tokens (a tree), keep the path at `offsets`."""
        self.backend.keep(count, offsets)


def _check_context(length: int, config: GenerationConfig, limit: int, what: str) -> None:
    if length + config.max_new_tokens > limit:
        raise InputError(
            f"the {what} is {length} tokens; with {config.max_new_tokens} new tokens it exceeds the "
            f"model's context of {limit} tokens: shorten the prompt or lower max new tokens"
        )


def _cut(tokens: list[int], budget: int, eos: set[int]) -> tuple[list[int], bool]:
    """Tokens up to the budget and the first EOS (kept); True when decoding must end."""
    out = []
    for token in tokens[:budget]:
        out.append(token)
        if token in eos:
            return out, True
    return out, len(tokens) >= budget


def _text(pair: ModelPair, token_ids: list[int]) -> str:
    return pair.tokenizer.decode(token_ids, skip_special_tokens=True)


def _new_generator(pair: ModelPair, seed: int) -> torch.Generator:
    return torch.Generator(device=pair.device).manual_seed(seed)


def autoregressive_generate(
    pair: ModelPair,
    turns: list[conversation.Turn],
    config: GenerationConfig,
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """Plain decoding with the target alone: one forward per token, same cache and stopping rules."""
    prompt = conversation.encode(pair.target_processor, turns, pair.device, pair.dtype)
    _check_context(prompt.length, config, pair.context_length, "prompt")
    yield Started(mode="autoregressive", prompt_tokens=prompt.length)
    generator = _new_generator(pair, config.seed)
    clock = Clock(pair.device)
    session = TargetSession(pair.backend("target"))
    logits = session.prefill(prompt)[-1]
    tokens: list[TokenEvent] = []
    out: list[int] = []
    prefill_s = 0.0
    last = clock.start
    stopped = False
    while True:
        token = choose_token(logits, logits_to_probs(logits, config.temperature, config.top_p),
                             config.temperature, generator)
        out.append(token)
        now = clock.now()
        if not tokens:
            prefill_s = now - clock.start
        event = TokenEvent(index=len(out) - 1, token_id=token, step_s=now - last, elapsed_s=now - clock.start)
        last = now
        tokens.append(event)
        yield event
        if token in pair.eos_token_ids or len(out) >= config.max_new_tokens:
            break
        if stop is not None and stop.is_set():
            stopped = True
            break
        logits = session.forward([token])[-1]
    walltime = clock.elapsed()
    decode_s = walltime - prefill_s
    forwards = len(out)
    metrics = Metrics(
        cpu_share=clock.cpu_share(),
        new_tokens=len(out),
        prefill_s=prefill_s,
        decode_s=decode_s,
        walltime_s=walltime,
        tokens_per_s=len(out) / walltime if walltime > 0 else 0.0,
        target_forwards=forwards,
        block_efficiency=1.0 if forwards else 0.0,
        verify_s=walltime,
    )
    result = GenerationResult(mode="autoregressive", spec=None, token_ids=out, text=_text(pair, out),
                              metrics=metrics, tokens=tokens, stopped=stopped)
    yield Finished(result)


def _leading_matches(guesses: list[int], truth: list[int]) -> int:
    count = 0
    for guess, token in zip(guesses, truth, strict=False):
        if guess != token:
            break
        count += 1
    return count


@dataclass
class SpeculativeRun:
    """The state of one speculative generation between blocks."""

    methods: tuple[str, ...]
    out: list[int]
    pending: list[int]  # committed tokens the drafter has not seen yet
    history: WeightHistory | None
    length: DraftLength
    lookup: NgramLookup | None = None  # the model-free method N, when the spec has it
    resting: Resting | None = None  # which drafter rows rest, when rows may
    blocks: list[BlockEvent] = field(default_factory=list)

    @property
    def learned(self) -> bool:
        """Whether the weights come from verified positions (else they are uniform, and cost nothing)."""
        return self.history is not None and len(self.history) > 0

    def weights(self) -> torch.Tensor:
        return self.history.weights() if self.learned else uniform_weights(len(self.methods))


def record_block(run: SpeculativeRun, draft: Draft, verdict: Verdict, weights: torch.Tensor,
                 emitted: list[int], times: dict[str, float], resting: list[str] = ()) -> BlockEvent:
    """The block's event, with each drafting method's counterfactual run of accepted guesses (none for
    the `resting` ones, which did not draft)."""
    gamma, accepted, target_token = len(draft.tokens), verdict.accepted, verdict.target_token
    truth = draft.tokens[:accepted] + [target_token]
    top1 = torch.stack(draft.row_probs).argmax(-1).T.tolist() if gamma else [[] for _ in run.methods]  # (K, γ)
    guesses = {m: row for m, row in zip(run.methods, top1, strict=True) if m not in resting}
    index = torch.arange(gamma, device=verdict.target_probs.device)
    tokens = torch.tensor(draft.tokens, dtype=torch.long, device=index.device)
    return BlockEvent(
        index=len(run.blocks),
        weights=dict(zip(run.methods, weights.tolist(), strict=True)),
        draft=draft.tokens,
        drafts=guesses,
        accepted=accepted,
        target_token=target_token,
        bonus=accepted == gamma,
        emitted=emitted,
        draft_probs=torch.stack(draft.mixed_probs)[index, tokens].tolist() if gamma else [],
        target_probs=verdict.target_probs[index, tokens].tolist() if gamma else [],
        target_token_prob=float(verdict.target_probs[accepted, target_token]),
        method_accepted={m: _leading_matches(guesses[m][:gamma], truth) for m in guesses},
        resting=list(resting),
        stop=draft.stop,
        threshold=run.length.threshold if run.length.adaptive else None,
        survival=run.length.survival if run.length.adaptive else None,
        **times,
        tree=verdict.nodes,
    )


def speculative_generate(
    pair: ModelPair,
    turns: list[conversation.Turn],
    spec: DraftingSpec,
    config: GenerationConfig,
    captioner: Captioner | None = None,
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """TABED speculative decoding: batched multi-method drafts, ensembled, verified losslessly."""
    images = conversation.images_of(turns)
    prompt = conversation.encode(pair.target_processor, turns, pair.device, pair.dtype)
    _check_context(prompt.length, config, pair.context_length, "prompt")
    caption_clock = Clock(pair.device)
    captions = (captioner or captioner_for(pair)).caption(images) if "C" in spec.methods and images else []
    caption_s = caption_clock.elapsed()
    draft_prompt = conversation.encode(pair.drafter_processor, turns, pair.device, pair.dtype)
    _check_context(draft_prompt.length, config, pair.context_length, "drafter's prompt")
    notes = list(pair.notes)
    if not images and set(spec.methods) & {"M", "C", "P"}:
        notes.append("no image in the conversation: the M, C and P rows are the same text-only prompt as T")
    yield Started(mode="speculative", prompt_tokens=prompt.length, methods=list(spec.methods),
                  captions=captions, notes=notes)

    generator = _new_generator(pair, config.seed)
    clock = Clock(pair.device)
    session = TargetSession(pair.backend("target"))
    history = (WeightHistory(len(spec.methods), config.rule, config.window, horizon=config.max_new_tokens,
                             summed=None if config.window else pair.weight_stats(config.rule, len(spec.methods)))
               if spec.dynamic else None)
    out: list[int] = []
    lookup = NgramLookup(prompt.input_ids[0].tolist(), out) if "N" in spec.methods else None
    run = SpeculativeRun(spec.methods, out, [], history, DraftLength(config.gamma, config.adaptive), lookup)
    drafter = start = None
    if config.max_new_tokens > 1:  # the drafter's image features and prefill come first: its drafts ride
        drafter = _start_drafter(pair, draft_prompt, spec.model_methods if images else ("T",), captions, config)
        start = drafter.prefill()  # on the target's prefill
        if history is not None and config.resting and drafter.can_rest:
            run.resting = Resting(history, len(spec.model_methods))
    done = stopped = False
    while not done:
        if run.blocks and stop is not None and stop.is_set():  # the first block is the prompt's own pass
            stopped = True
            break
        event, done = _block(pair, run, drafter, session, config, generator, clock,
                             prompt if not run.blocks else None, start)
        run.blocks.append(event)
        yield event

    walltime = clock.elapsed()
    metrics = _speculative_metrics(run, walltime, caption_s)
    metrics.cpu_share = clock.cpu_share()
    yield Finished(GenerationResult(mode="speculative", spec=spec.name, token_ids=run.out,
                                    text=_text(pair, run.out), metrics=metrics, blocks=run.blocks,
                                    captions=captions, notes=notes, stopped=stopped))


def _start_drafter(pair: ModelPair, prompt: conversation.EncodedPrompt, methods: tuple[str, ...],
                   captions: list[str], config: GenerationConfig) -> BatchedDrafter:
    """The drafting rows, prefilled. Without an image every row is the same text: it is drafted once."""
    with torch.inference_mode():
        rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, methods, captions)
    for row in rows:
        _check_context(int(row.input_ids.shape[0]), config, pair.context_length, f"{row.method} row")
    return BatchedDrafter(pair.drafter, rows, pair.backend("drafter", len(rows)))


def _block(pair: ModelPair, run: SpeculativeRun, drafter: BatchedDrafter | None, session: TargetSession,
           config: GenerationConfig, generator: torch.Generator, clock: Clock,
           prompt: conversation.EncodedPrompt | None = None, start: torch.Tensor | None = None,
           ) -> tuple[BlockEvent, bool]:
    """One block: draft -> verify -> record. Returns its event and whether decoding is done. The first
    block (`prompt` given) drafts from the drafter's prefill logits (`start`) and is verified by the
    target's pass over the prompt. With a tree width over 1 every block drafts a tree."""
    block_start = clock.now()
    weights, weights_s, resting = _weigh(pair, run, drafter, config, clock)
    gamma = min(config.gamma, config.max_new_tokens - len(run.out) - 1)
    candidate = _draft(pair, run, drafter, gamma, weights, config, generator, prompt, start)
    verify_start = clock.now()
    verdict, draft = _verify(run, drafter, session, candidate, config, generator, prompt)
    truth = draft.tokens[:verdict.accepted] + [verdict.target_token]
    emitted, done = _cut(truth, config.max_new_tokens - len(run.out), pair.eos_token_ids)
    verify_end = clock.now()
    if not done and run.history is not None:  # the last block's verification would teach no block
        _learn(run, drafter, draft, verdict)
        weights_s += clock.now() - verify_end
    run.out.extend(emitted)
    times = {"draft_s": verify_start - block_start, "verify_s": verify_end - verify_start,
             "weights_s": weights_s, "elapsed_s": clock.now() - clock.start}
    event = record_block(run, draft, verdict, weights, emitted, times, resting)
    if not done:
        run.length.learn(event.draft_probs, verdict.accepted)
    return event, done


def _weigh(pair: ModelPair, run: SpeculativeRun, drafter: BatchedDrafter | None, config: GenerationConfig,
           clock: Clock) -> tuple[torch.Tensor, float, list[str]]:
    """The block's weights, the seconds they took, and the methods whose rows rest in it (rows due to
    catch up do so first, so that the weights see the history they owed)."""
    fed = len(run.out) - len(run.pending)  # answer tokens the drafter's batch has seen
    if run.resting is not None:
        run.resting.before_block(drafter, run.out, fed, config)
    learned = run.learned  # timed only then: on a GPU every reading of the clock waits for the device
    start = clock.now() if learned else 0.0
    weights = run.weights().to(pair.device)  # once per block, not at every draft step
    seconds = clock.now() - start if learned else 0.0
    if run.resting is not None:
        run.resting.choose(drafter, weights, fed)
    return weights, seconds, [run.methods[row] for row in drafter.resting_rows] if drafter is not None else []


def _learn(run: SpeculativeRun, drafter: BatchedDrafter | None, draft: Draft, verdict: Verdict) -> None:
    """The target's distributions at the verified positions (the accepted drafts and the first rejected
    one) are past ground truth for the weights (of a run that has a history)."""
    verified = min(verdict.accepted + 1, len(draft.tokens))
    if not verified:
        return
    log_q = torch.stack(draft.row_log_probs[:verified]) if draft.row_log_probs else None
    p, q = verdict.target_probs[:verified], torch.stack(draft.row_probs[:verified])
    if run.resting is not None:
        run.resting.record(drafter, len(run.out), p, q, log_q)
    else:
        run.history.add(p, q, log_q)


def _draft(pair: ModelPair, run: SpeculativeRun, drafter: BatchedDrafter | None, gamma: int, weights: torch.Tensor,
           config: GenerationConfig, generator: torch.Generator, prompt: conversation.EncodedPrompt | None,
           start: torch.Tensor | None) -> Draft | DraftTree:
    """A chain or a tree (`_tree_shape`); the first block's from the drafter's prefill logits (`start`)."""
    drafting = {"log_probs": run.history is not None and run.history.needs_log_q, "lookup": run.lookup,
                "ends": frozenset(pair.eos_token_ids)}
    start = start if prompt is not None else None
    shape = _tree_shape(run, drafter, config, first=prompt is not None)
    if shape is not None and gamma > 0:
        width, policy = shape
        banned = image_token_id(pair.target) if prompt is not None else None
        candidate = None
        if policy == "unsure":  # a chain while the ensemble is sure, a tree from its first doubt
            candidate = draft_block(drafter, run.pending, gamma, weights, len(run.methods), config, generator,
                                    run.length, start=start, fork_below=UNSURE, banned=banned, **drafting)
        if candidate is None or candidate.stop == "fork":
            candidate = draft_tree(drafter, run.pending, gamma, width, weights, len(run.methods), config, generator,
                                   run.length, policy=policy, start=start, banned=banned, chain=candidate,
                                   **drafting)
    else:
        candidate = draft_block(drafter, run.pending, gamma, weights, len(run.methods), config, generator,
                                run.length, start=start, **drafting)
        if prompt is not None:
            _keep_image_tokens_out(pair, drafter, candidate)
    if gamma < config.gamma and candidate.stop not in ("unsure", "image", "eos"):
        candidate.stop = "budget"
    return candidate


def _tree_shape(run: SpeculativeRun, drafter: BatchedDrafter | None, config: GenerationConfig,
                first: bool) -> tuple[int, str] | None:
    """A block's tree as (width, policy), or None for a chain: the configured trees, else the hedged first
    block (`hedged_first`)."""
    if config.tree_width > 1:
        return (config.tree_width, config.tree_policy) if first or config.tree_blocks == "all" else None
    if first and hedged_first(config, run.history is not None, len(drafter.rows) if drafter is not None else 0):
        return HEDGE_WIDTH, "unsure"
    return None


def hedged_first(config: GenerationConfig, dynamic: bool, rows: int) -> bool:
    """Whether the first block hedges: with chains, a TABED spec whose drafter runs several rows (methods
    that see different inputs: a picture is in the conversation) drafts its first block as a width-2
    "unsure" tree. That block is drafted before any weight is learned, so where the methods disagree the
    uniform ensemble follows whichever is surer, which on image questions is at times the text-only
    method's wrong word; the tree tries the second token too, and stays a chain while the ensemble is
    sure. With one row (no picture) there is nothing to hedge between."""
    return config.hedge_first and config.tree_width == 1 and dynamic and rows > 1


def _verify(run: SpeculativeRun, drafter: BatchedDrafter | None, session: TargetSession, candidate: Draft | DraftTree,
            config: GenerationConfig, generator: torch.Generator, prompt: conversation.EncodedPrompt | None,
            ) -> tuple[Verdict, Draft]:
    """Verify the drafts and roll both caches to what was kept: the verdict, and the drafts it judged as
    a chain (a tree's accepted path and the best drafts below it)."""
    if isinstance(candidate, DraftTree):
        tree = TreeVerifier(run.methods)
        verdict = tree.verify(session, run.out[-1] if run.out else None, candidate, config, generator, prompt)
        run.pending = tree.commit(session, drafter, candidate, verdict, run.pending)
        return verdict, verdict.path
    chain = ChainVerifier()
    verdict = chain.verify(session, run.out[-1] if run.out else None, candidate, config, generator, prompt)
    run.pending = chain.commit(session, drafter, candidate, verdict, run.pending)
    return verdict, candidate


def _keep_image_tokens_out(pair: ModelPair, drafter: BatchedDrafter | None, draft: Draft) -> None:
    """Drafts ride on the prompt's pass, where the model counts image placeholders against its image
    features: a drafted placeholder token (a random model's, never a trained one's) ends the draft."""
    placeholder = image_token_id(pair.target)
    if placeholder not in draft.tokens:
        return
    cut_draft(drafter, draft, draft.tokens.index(placeholder), "image")


def _speculative_metrics(run: SpeculativeRun, walltime: float, caption_s: float) -> Metrics:
    """The prefill is the target's pass over the prompt, which also verified the first block: the
    decode phase is everything else (the drafter's start and first drafts included)."""
    blocks = run.blocks
    drafted = sum(len(b.draft) for b in blocks)
    prefill_s = blocks[0].verify_s if blocks else 0.0
    per_method = {}
    for m in run.methods:  # over the blocks the method drafted in (not those it rested through)
        runs = [b.method_accepted[m] for b in blocks if m in b.method_accepted]
        per_method[m] = 1.0 + sum(runs) / len(runs) if runs else 0.0
    return Metrics(
        new_tokens=len(run.out),
        prefill_s=prefill_s,
        decode_s=walltime - prefill_s,
        walltime_s=walltime + caption_s,
        tokens_per_s=len(run.out) / (walltime + caption_s) if walltime > 0 else 0.0,
        target_forwards=len(blocks),
        block_efficiency=len(run.out) / len(blocks) if blocks else 0.0,
        acceptance_rate=sum(b.accepted for b in blocks) / drafted if drafted else 0.0,
        method_block_efficiency=per_method,
        draft_s=sum(b.draft_s for b in blocks),
        verify_s=sum(b.verify_s for b in blocks) - prefill_s,
        weights_s=sum(b.weights_s for b in blocks),
        caption_s=caption_s,
    )


def collect(events: Iterator[Event]) -> GenerationResult:
    """Run a decoding generator to its end and return its result."""
    for event in events:
        if isinstance(event, Finished):
            return event.result
    raise RuntimeError("decoding ended without a result")


def compare(speculative: GenerationResult, autoregressive: GenerationResult) -> float:
    """Record and return the decode-time speedup of speculative over autoregressive decoding."""
    spec_s = speculative.metrics.decode_s
    speedup = autoregressive.metrics.decode_s / spec_s if spec_s > 0 else float("nan")
    speculative.metrics.speedup = speedup
    return speedup


TREE_STEPS = tuple(range(1, TREE_GRAPH_TOKENS + 1))  # the tree forwards of a drafter's frontier


def warm_up(pair: ModelPair, gamma: int = AUTO_CAP, rows: tuple[int, ...] = (1, 2)) -> None:
    """Run both models through their cache backends before anything is timed: the first kernels of each
    kind, and with static caches on a GPU the CUDA graphs of the usual shapes (target: every verify
    length up to γ + 1 tokens and every padded tree size; drafter: 1 and 2 rows; both: tree steps of up
    to TREE_GRAPH_TOKENS nodes, as a hedged first block's fork takes), then one short generation each way
    on a blank picture."""
    from PIL import Image

    ids = torch.tensor([[pair.tokenizer.bos_token_id or 0] * 4], device=pair.device)
    for role, batch, lengths in (("target", 1, range(1, gamma + 2)), *(("drafter", k, (1, 2)) for k in rows)):
        backend = pair.backend(role, batch)
        backend.prefill(torch.ones_like(ids).expand(batch, -1), input_ids=ids.expand(batch, -1))
        for count in lengths:
            backend.forward(ids[:, :1].expand(batch, count))
        if isinstance(backend, StaticBackend) and backend.graphs:  # a fresh prefill: room for the trees' graphs
            backend.prefill(torch.ones_like(ids).expand(batch, -1), input_ids=ids.expand(batch, -1))
            backend.capture_trees(int(ids[0, 0]), TREE_STEPS + (TREE_VERIFY_BUCKETS if role == "target" else ()))
    turns = [conversation.Turn("Describe the picture.", [Image.new("RGB", (64, 64), (128, 128, 128))])]
    config = GenerationConfig(max_new_tokens=2 * gamma + 2, gamma=gamma)
    collect(speculative_generate(pair, turns, DraftingSpec(("M", "T"), dynamic=True), config))
    collect(autoregressive_generate(pair, turns, config))  # its backend call records why graphs are off, if they are
