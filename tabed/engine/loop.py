"""Speculative decoding with an ensemble of batched drafts, and the plain autoregressive baseline.

Both are generators of events (see `events.py`); closing the generator or setting `cancel` ends the
run between blocks (or tokens) with a final `Finished` event. Each block drafts (a chain, `chain.py`,
or a token tree, `tree.py`), verifies in one target forward, and records; the first block's drafts
ride on the target's pass over the prompt, which also gives the answer's first token (all that sets it
apart is in `drafts.AfterPrompt`; every other block is `drafts.AfterToken`). The run's state between
blocks is one `SpeculativeRun`; each step of a block (weigh, draft, verify, learn, record) takes it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import torch

from ..errors import InputError
from ..models import chat
from ..models.captioning import Captioner, captioner_for
from ..models.pair import ModelPair
from ..models.warmup import warm_backends
from .acceptance import Acceptance
from .chain import ChainVerifier, draft_block
from .config import GenerationConfig
from .draft_length import AUTO_CAP, DraftLength, min_survival_on
from .drafter import BatchedDrafter, build_rows, image_token_id
from .drafts import AfterPrompt, AfterToken, BlockStart, DraftChain, DraftContext, Verdict
from .ensemble import WeightHistory, share_equally, uniform_weights
from .events import BlockEvent, Event, Finished, GenerationResult, Metrics, Started, StopReason, TokenEvent
from .inspection import block_positions, weight_update
from .lookup import NgramLookup
from .resting import RestSchedule
from .sampling import choose_token, is_greedy, logits_to_probs
from .session import Clock, TargetSession
from .settings import hedges_first
from .spec import DraftingSpec
from .speed import decode_speedup
from .tree import UNSURE, DraftTree, TreeVerifier, draft_tree
from .weights_graph import GraphedStats, graphed_stats


def _fit_context(pair: ModelPair, turns: list[chat.Turn], config: GenerationConfig, prompt: chat.EncodedPrompt,
                 ) -> tuple[GenerationConfig, list[str], chat.EncodedPrompt]:
    """The config with max new tokens lowered to what both models' contexts leave after their prompts (and
    a note saying so), and the drafter's prompt; a prompt that leaves no room is refused. Plain and
    speculative decoding fit alike, so that both decode the same number of tokens."""
    draft_prompt = chat.encode(pair.drafter_processor, turns, pair.device, pair.dtype)
    room, why = config.max_new_tokens, ""
    for role, length in (("target", prompt.length), ("drafter", draft_prompt.length)):
        limit = pair.context_of(role)
        if limit - length < 1:
            raise InputError(f"the prompt is {length} tokens, which fills the {role}'s context of {limit} tokens: "
                             "shorten the prompt" + (" or give fewer pictures" if chat.images_of(turns) else ""))
        if limit - length < room:
            room, why = limit - length, f"the prompt is {length} tokens and the {role}'s context {limit}"
    if room == config.max_new_tokens:
        return config, [], draft_prompt
    return replace(config, max_new_tokens=room), [
        f"max new tokens lowered from {config.max_new_tokens} to {room}: {why}"], draft_prompt


def _check_context(length: int, config: GenerationConfig, limit: int, what: str) -> None:
    if length + config.max_new_tokens > limit:
        raise InputError(
            f"the {what} is {length} tokens; with {config.max_new_tokens} new tokens it exceeds the "
            f"drafter's context of {limit} tokens: shorten the prompt or lower max new tokens"
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
    turns: list[chat.Turn],
    config: GenerationConfig,
    cancel: threading.Event | None = None,
) -> Iterator[Event]:
    """Plain decoding with the target alone: one forward per token, same cache and stopping rules."""
    prompt = chat.encode(pair.target_processor, turns, pair.device, pair.dtype)
    config, notes, _ = _fit_context(pair, turns, config, prompt)
    yield Started(mode="autoregressive", prompt_tokens=prompt.length, notes=notes)
    generator = _new_generator(pair, config.seed)
    clock = Clock(pair.device)
    session = TargetSession(pair.backend("target"))
    logits = session.prefill(prompt)[-1]
    tokens: list[TokenEvent] = []
    out: list[int] = []
    last, stopped = clock.start, False
    while True:
        token = choose_token(logits, logits_to_probs(logits, config.temperature, config.top_p),
                             config.temperature, generator)
        out.append(token)
        now = clock.now()
        tokens.append(TokenEvent(index=len(out) - 1, token_id=token, step_s=now - last, elapsed_s=now - clock.start))
        last = now
        yield tokens[-1]
        if token in pair.eos_token_ids or len(out) >= config.max_new_tokens:
            break
        if cancel is not None and cancel.is_set():
            stopped = True
            break
        logits = session.forward([token])[-1]
    result = GenerationResult(mode="autoregressive", spec=None, token_ids=out, text=_text(pair, out),
                              metrics=_plain_metrics(clock, tokens), tokens=tokens, stopped=stopped)
    yield Finished(result)


def _plain_metrics(clock: Clock, tokens: list[TokenEvent]) -> Metrics:
    """Plain decoding's figures: its prefill is the prompt's pass, which also gave the first token; one
    target forward per token."""
    walltime = clock.elapsed()
    prefill_s = tokens[0].elapsed_s if tokens else 0.0
    share = clock.cpu_share()
    return Metrics(
        cpu_share=share,
        busy=clock.busy(share),
        new_tokens=len(tokens),
        prefill_s=prefill_s,
        decode_s=walltime - prefill_s,
        walltime_s=walltime,
        tokens_per_s=len(tokens) / walltime if walltime > 0 else 0.0,
        target_forwards=len(tokens),
        block_efficiency=1.0 if tokens else 0.0,
        verify_s=walltime,
    )


def _leading_matches(guesses: list[int], truth: list[int]) -> int:
    count = 0
    for guess, token in zip(guesses, truth, strict=False):
        if guess != token:
            break
        count += 1
    return count


@dataclass
class SpeculativeRun:
    """One speculative generation between blocks: what it runs on and with, and what it has learned."""

    pair: ModelPair
    config: GenerationConfig
    methods: tuple[str, ...]
    clock: Clock
    session: TargetSession
    generator: torch.Generator
    history: WeightHistory | None  # TABED's (None for a static ensemble or a single method)
    length: DraftLength
    drafter: BatchedDrafter | None = None  # None when one token is all there is to decode
    lookup: NgramLookup | None = None  # the model-free method N, when the spec has it
    rest_schedule: RestSchedule | None = None  # which drafter rows rest, when rows may
    out: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)  # committed tokens the drafter has not seen yet
    blocks: list[BlockEvent] = field(default_factory=list)
    hedges_first: bool = False  # the first block hedges (`settings.hedges_first`)
    shared_rows: list[int] = field(default_factory=list)  # the methods drafted as one row (`shared_row`): one weight

    @property
    def learned(self) -> bool:
        """Whether the weights come from verified positions (else they are uniform, and cost nothing)."""
        return self.history is not None and len(self.history) > 0

    def weights(self) -> torch.Tensor:
        return self.history.weights() if self.learned else uniform_weights(len(self.methods))


@dataclass(frozen=True)
class Weighing:
    """A block's weights, the seconds the rule took, and (when inspecting) how it chose them."""

    weights: torch.Tensor
    seconds: float
    update: dict | None = None  # `BlockEvent.weight_update`


@dataclass(frozen=True)
class Drafted:
    """A block's drafts and the verifier that judges them: a chain's or a tree's, chosen as they were drafted
    (an "unsure" tree that never forked is a chain)."""

    candidate: DraftChain | DraftTree
    verifier: ChainVerifier | TreeVerifier


@dataclass(frozen=True)
class BlockRecord:
    """What one block made, step by step: what its event reports."""

    weighing: Weighing
    draft: DraftChain  # the drafts as judged: a tree's accepted path and the best drafts below it
    verdict: Verdict
    confidences: list[float]  # the ensemble's probability of each draft
    emitted: list[int]  # what the block added to the answer
    times: dict[str, float]
    ended: bool  # the answer ended in this block


def _record_block(run: SpeculativeRun, record: BlockRecord) -> BlockEvent:
    """The block's event (a report: the loop reads nothing back from it), with each drafting method's
    counterfactual run of accepted guesses (none for the methods whose rows rest, which did not draft). In
    the block that ended the answer a method's run counts only what the answer still had room for:
    nothing follows an end token, nor the last token allowed."""
    draft, verdict, emitted = record.draft, record.verdict, record.emitted
    gamma, accepted, target_token = len(draft.tokens), verdict.accepted, verdict.target_token
    resting = [run.methods[row] for row in run.drafter.resting_rows] if run.drafter is not None else []
    truth = draft.tokens[:accepted] + [target_token]
    room = len(emitted) - 1 if record.ended else len(truth)
    top1 = torch.stack(draft.row_probs).argmax(-1).T.tolist() if gamma else [[] for _ in run.methods]  # (K, γ)
    guesses = {m: row for m, row in zip(run.methods, top1, strict=True) if m not in resting}
    index = torch.arange(gamma, device=verdict.target_probs.device)
    tokens = torch.tensor(draft.tokens, dtype=torch.long, device=index.device)
    answered = len(emitted) > accepted  # the target's own token made it into the answer
    return BlockEvent(
        index=len(run.blocks),
        weights=dict(zip(run.methods, record.weighing.weights.tolist(), strict=True)),
        draft=draft.tokens,
        drafts=guesses,
        accepted=accepted,
        target_token=target_token if answered else None,
        bonus=accepted == gamma and answered,
        emitted=emitted,
        draft_probs=record.confidences,
        target_probs=verdict.target_probs[index, tokens].tolist() if gamma else [],
        target_token_prob=float(verdict.target_probs[accepted, target_token]) if answered else None,
        method_accepted={m: min(_leading_matches(guesses[m][:gamma], truth), room) for m in guesses},
        resting=resting,
        stop=draft.stop,
        threshold=run.length.threshold if run.length.adaptive else None,
        survival=run.length.survival if run.length.adaptive else None,
        **record.times,
        tree=verdict.nodes,
        positions=(block_positions(run.methods, resting, draft, verdict, is_greedy(run.config.temperature))
                   if run.config.inspect else []),
        weight_update=record.weighing.update,
    )


def speculative_generate(
    pair: ModelPair,
    turns: list[chat.Turn],
    spec: DraftingSpec,
    config: GenerationConfig,
    captioner: Captioner | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[Event]:
    """TABED speculative decoding: batched multi-method drafts, ensembled, verified losslessly."""
    images = chat.images_of(turns)
    prompt = chat.encode(pair.target_processor, turns, pair.device, pair.dtype)
    config, fitted, draft_prompt = _fit_context(pair, turns, config, prompt)
    caption_clock = Clock(pair.device)
    captions = (captioner or captioner_for(pair)).caption(images) if "C" in spec.methods and images else []
    caption_s = caption_clock.elapsed()
    shared = shared_row(spec, bool(images))
    learns = spec.tabed and len(shared) < len(spec.methods)  # one shared row and nothing else: nothing to weigh
    summed, why_eager = (graphed_stats(pair, config.rule, len(spec.methods)) if learns and not config.window
                         else (None, None))
    notes = list(pair.notes) + fitted + ([why_eager] if why_eager else [])
    if shared:
        notes.append(f"no picture in the conversation: {', '.join(shared)} read the same text, so they are drafted "
                     "once, as one row, and share one weight (split equally: no rule can tell them apart)")
    yield Started(mode="speculative", prompt_tokens=prompt.length, methods=list(spec.methods),
                  captions=captions, notes=notes, shared=shared)

    run = _start_run(pair, spec, config, prompt, pictures=bool(images), summed=summed, learns=learns)
    run.shared_rows = [run.methods.index(method) for method in shared]
    began = run.clock.now()  # the first block's drafting begins with the drafter's prefill, which it drafts from
    prefill_logits = _start_drafter(run, draft_prompt, spec.model_methods if images else ("T",), captions)
    start: BlockStart = AfterPrompt(prompt, prefill_logits, image_token_id(pair.target))
    done = stopped = False
    while not done:
        event, done = _block(run, start, began)
        run.blocks.append(event)
        yield event
        if not done and cancel is not None and cancel.is_set():  # between blocks (the first is the prompt's pass)
            stopped = True
            break
        start, began = AfterToken(run.out[-1]), run.clock.now()

    metrics = _speculative_metrics(run, run.clock.elapsed(), caption_s)
    metrics.cpu_share = run.clock.cpu_share()
    metrics.busy = run.clock.busy(metrics.cpu_share)
    yield Finished(GenerationResult(mode="speculative", spec=spec.name, token_ids=run.out,
                                    text=_text(pair, run.out), metrics=metrics, blocks=run.blocks,
                                    captions=captions, notes=notes, stopped=stopped, shared=shared))


def shared_row(spec: DraftingSpec, pictures: bool) -> list[str]:
    """The methods drafted as one row: with no picture every model method (M, T, C, P) reads the same
    text; none when there is a picture, or a single model method."""
    return list(spec.model_methods) if not pictures and len(spec.model_methods) > 1 else []


def min_survival_of(config: GenerationConfig, device: torch.device) -> float:
    """The config's minimum survival, or the device's (`draft_length.min_survival_on`)."""
    return min_survival_on(device.type) if config.min_survival is None else config.min_survival


def _start_run(pair: ModelPair, spec: DraftingSpec, config: GenerationConfig, prompt: chat.EncodedPrompt,
               pictures: bool, summed: GraphedStats | None, learns: bool) -> SpeculativeRun:
    generator = _new_generator(pair, config.seed)
    clock = Clock(pair.device)
    session = TargetSession(pair.backend("target"))
    history = (WeightHistory(len(spec.methods), config.rule, config.window, horizon=config.max_new_tokens,
                             summed=summed)
               if learns else None)
    run = SpeculativeRun(pair, config, spec.methods, clock, session, generator, history,
                         DraftLength(config.gamma, config.adaptive, min_survival_of(config, pair.device)),
                         hedges_first=hedges_first(spec, config, pictures))
    if "N" in spec.methods:
        run.lookup = NgramLookup(prompt.input_ids[0].tolist(), run.out)
    return run


def _start_drafter(run: SpeculativeRun, prompt: chat.EncodedPrompt, methods: tuple[str, ...],
                   captions: list[str]) -> torch.Tensor | None:
    """The drafting rows, prefilled (first, so that the first block's drafts ride on the target's prefill):
    their logits after the prompt; none when one token is all there is to decode. Without an image every
    row is the same text: it is drafted once."""
    pair, config = run.pair, run.config
    if config.max_new_tokens <= 1:
        return None
    with torch.inference_mode():
        rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, methods, captions)
    for row in rows:
        _check_context(int(row.input_ids.shape[0]), config, pair.context_of("drafter"), f"{row.method} row")
    run.drafter = BatchedDrafter(pair.drafter, rows, pair.backend("drafter", len(rows)))
    logits = run.drafter.prefill()
    if run.history is not None and config.may_rest and run.drafter.can_rest:
        run.rest_schedule = RestSchedule(run.history, sum(method != "N" for method in run.methods))
    return logits


def _block(run: SpeculativeRun, start: BlockStart, began: float) -> tuple[BlockEvent, bool]:
    """One block: weigh -> draft -> verify -> cut -> learn -> record. Returns its event and whether decoding
    is done. `start`: how it begins (the first, `AfterPrompt`, rides on the target's pass over the prompt);
    `began`: when its drafting began, on the run's clock."""
    clock, config = run.clock, run.config
    seen = len(run.out) - len(run.pending)  # answer tokens the drafter's batch has seen
    if run.rest_schedule is not None:  # rows due to catch up do so first: the weights see the history they owed
        run.rest_schedule.before_block(run.drafter, run.out, seen, config)
    weighing = _weigh(run)
    if run.rest_schedule is not None:  # then rows may start or stop resting
        run.rest_schedule.choose(run.drafter, weighing.weights, seen)
    gamma = min(config.gamma, config.max_new_tokens - len(run.out) - 1)
    drafted = _draft(run, gamma, weighing.weights, start)
    verify_start = clock.now()
    verdict = drafted.verifier.verify(run.session, drafted.candidate, config, run.generator)
    # both caches keep what was accepted, nothing recomputed; the drafter lags by the tokens it has not seen
    run.pending = drafted.verifier.commit(run.session, run.drafter, drafted.candidate, verdict, run.pending)
    draft = verdict.path if verdict.path is not None else drafted.candidate
    truth = draft.tokens[:verdict.accepted] + [verdict.target_token]
    emitted, done = _cut(truth, config.max_new_tokens - len(run.out), run.pair.eos_token_ids)
    verify_end = learn_end = clock.now()
    if not done and run.history is not None:  # the last block's verification would teach no block
        _learn(run, draft, verdict)
        learn_end = clock.now()
    run.out.extend(emitted)
    times = {"draft_s": verify_start - began, "verify_s": verify_end - verify_start,
             "weights_s": weighing.seconds + learn_end - verify_end, "elapsed_s": clock.now() - clock.start}
    confidences = draft.confidences()
    if not done:
        run.length.learn(confidences, verdict.accepted)
    record = BlockRecord(weighing, draft, verdict, confidences, emitted, times, done)
    return _record_block(run, record), done


def _weigh(run: SpeculativeRun) -> Weighing:
    """The block's weights (once per block, not at every draft step), with the time the rule took."""
    learned = run.learned  # timed only then: on a GPU every reading of the clock waits for the device
    start = run.clock.now() if learned else 0.0
    weights = run.weights().to(run.pair.device)
    if run.shared_rows and learned:
        weights = share_equally(weights, run.shared_rows)
    seconds = run.clock.now() - start if learned else 0.0
    waiting = run.rest_schedule.waiting_positions() if run.rest_schedule is not None else 0
    update = (weight_update(run.history, weights, [run.methods[row] for row in run.shared_rows], waiting)
              if run.config.inspect and learned else None)
    return Weighing(weights, seconds, update)


def _learn(run: SpeculativeRun, draft: DraftChain, verdict: Verdict) -> None:
    """The target's distributions at the verified positions (the accepted drafts and the first rejected
    one) are past ground truth for the weights (of a run that has a history)."""
    verified = min(verdict.accepted + 1, len(draft.tokens))
    if not verified:
        return
    log_q = torch.stack(draft.row_log_probs[:verified]) if draft.row_log_probs else None
    p, q = verdict.target_probs[:verified], torch.stack(draft.row_probs[:verified])
    if run.rest_schedule is not None:
        run.rest_schedule.record(run.drafter, len(run.out), p, q, log_q)
    else:
        run.history.add(p, q, log_q)


def _draft(run: SpeculativeRun, gamma: int, weights: torch.Tensor, start: BlockStart) -> Drafted:
    """A chain or a tree (`BlockStart.tree_shape`: the configured trees, else the hedged first block), with
    the verifier that judges it."""
    shape = start.tree_shape(run.config, run.hedges_first) if gamma > 0 else None
    drafting = DraftContext(run.drafter, run.pending, weights, len(run.methods), run.config, run.generator,
                            start, run.length, log_probs=run.history is not None and run.history.needs_log_q,
                            lookup=run.lookup, ends=frozenset(run.pair.eos_token_ids),
                            banned=start.banned if shape is not None else None)
    candidate = None
    if shape is not None:
        width, policy = shape
        candidate = draft_block(drafting, gamma, fork_below=UNSURE) if policy == "unsure" else None
        if candidate is None or candidate.stop == StopReason.FORK:  # unsure: a chain while the ensemble is sure
            candidate = draft_tree(drafting, gamma, width, policy, chain=candidate)
    drafted = (Drafted(candidate, TreeVerifier(run.methods, start)) if isinstance(candidate, DraftTree)
               else Drafted(candidate or draft_block(drafting, gamma), ChainVerifier(start)))
    if gamma < run.config.gamma and drafted.candidate.stop not in (StopReason.UNSURE, StopReason.IMAGE,
                                                                   StopReason.EOS):
        drafted.candidate.stop = StopReason.BUDGET
    return drafted


def _speculative_metrics(run: SpeculativeRun, walltime: float, caption_s: float) -> Metrics:
    """The prefill is the target's pass over the prompt, which also verified the first block: the
    decode phase is everything else (the drafter's start and first drafts included)."""
    blocks = run.blocks
    drafted, accepted = sum(len(b.draft) for b in blocks), sum(b.accepted for b in blocks)
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
        acceptance_rate=accepted / drafted if drafted else 0.0,
        drafted=drafted,
        accepted=accepted,
        method_block_efficiency=per_method,
        **Acceptance.count(blocks).summary(),
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
    """Record and return the decode-time speedup of speculative over autoregressive decoding (per token when
    the answers, samples, differ in length: `speed.decode_speedup`); NaN when there is nothing to time."""
    speedup = decode_speedup(speculative.metrics, autoregressive.metrics)
    speculative.metrics.speedup = float("nan") if speedup is None else speedup
    return speculative.metrics.speedup


def warm_up(pair: ModelPair, gamma: int = AUTO_CAP, rows: tuple[int, ...] = (1, 2)) -> None:
    """Before anything is timed: both models through their cache backends (`models.warmup`: the first
    kernels of each kind, and the CUDA graphs of the usual shapes), then one short generation each way on
    a blank picture."""
    warm_backends(pair, gamma, rows)
    turns = chat.blank_question()
    config = GenerationConfig(max_new_tokens=2 * gamma + 2, gamma=gamma)
    collect(speculative_generate(pair, turns, DraftingSpec(("M", "T"), tabed=True), config))
    collect(autoregressive_generate(pair, turns, config))  # its backend call records why graphs are off, if they are
