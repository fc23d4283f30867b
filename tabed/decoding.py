"""Speculative decoding with an ensemble of batched drafts, and the plain autoregressive baseline.

Both are generators of events (see `events.py`); closing the generator or setting `stop` ends the
run between blocks (or tokens) with a final `Finished` event. The first answer token always comes
from the target's prefill, in both modes; block efficiency counts the decode phase after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from . import conversation
from .captioning import Captioner, captioner_for
from .drafter import BatchedDrafter, build_rows
from .ensemble import WeightHistory, ensemble, uniform_weights
from .errors import InputError
from .events import BlockEvent, Event, Finished, GenerationResult, Metrics, Started, TokenEvent
from .models import ModelPair
from .sampling import choose_token, is_greedy, logits_to_probs, verify_greedy, verify_sampling
from .spec import RULES, DraftingSpec


@dataclass
class GenerationConfig:
    """Decoding settings shared by speculative and autoregressive decoding."""

    max_new_tokens: int = 128
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int = 0
    gamma: int = 5  # draft length per block
    rule: str = "w-grid"  # TABED weight rule: w-grid, kld or tvd
    window: int = 0  # TABED history window in positions, 0 = all

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
        if self.window < 0:
            raise InputError(f"history window must be >= 0 (0 keeps all), got {self.window}")


class Clock:
    """Wall time that waits for queued GPU work, so each phase is charged what it really cost."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.start = self.now()

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def elapsed(self) -> float:
        return self.now() - self.start


class TargetSession:
    """The target model with its KV cache: prefill, score new tokens, roll back rejected ones."""

    def __init__(self, model) -> None:
        self.model = model
        self.cache = DynamicCache(config=model.config)

    @torch.inference_mode()
    def prefill(self, prompt: conversation.EncodedPrompt) -> torch.Tensor:
        out = self.model(
            input_ids=prompt.input_ids,
            **prompt.image_inputs,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[0, -1]

    @torch.inference_mode()
    def forward(self, tokens: list[int]) -> torch.Tensor:
        """Logits (len(tokens), V): position i scores the token after tokens[i]."""
        ids = torch.tensor([tokens], dtype=torch.long, device=self.model.device)
        return self.model(input_ids=ids, past_key_values=self.cache, use_cache=True).logits[0]

    def rollback(self, count: int) -> None:
        if count > 0:
            self.cache.crop(-count)


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
    session = TargetSession(pair.target)
    logits = session.prefill(prompt)
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
    forwards = len(out) - 1
    metrics = Metrics(
        new_tokens=len(out),
        prefill_s=prefill_s,
        decode_s=decode_s,
        walltime_s=walltime,
        tokens_per_s=len(out) / walltime if walltime > 0 else 0.0,
        target_forwards=forwards,
        block_efficiency=1.0 if forwards else 0.0,
        verify_s=decode_s,
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


def speculative_generate(
    pair: ModelPair,
    turns: list[conversation.Turn],
    spec: DraftingSpec,
    config: GenerationConfig,
    captioner: Captioner | None = None,
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """TABED speculative decoding: batched multi-method drafts, ensembled, verified losslessly."""
    methods = spec.methods
    images = conversation.images_of(turns)
    notes = []
    if not images and set(methods) & {"M", "C", "P"}:
        notes.append("no image in the conversation: the M, C and P rows are the same text-only prompt as T")
    prompt = conversation.encode(pair.target_processor, turns, pair.device, pair.dtype)
    _check_context(prompt.length, config, pair.context_length, "prompt")

    caption_clock = Clock(pair.device)
    captions: list[str] = []
    if "C" in methods and images:
        captions = (captioner or captioner_for(pair)).caption(images)
    caption_s = caption_clock.elapsed()
    draft_prompt = conversation.encode(pair.drafter_processor, turns, pair.device, pair.dtype)
    _check_context(draft_prompt.length, config, pair.context_length, "drafter's prompt")
    yield Started(mode="speculative", prompt_tokens=prompt.length, methods=list(methods),
                  captions=captions, notes=notes)

    greedy = is_greedy(config.temperature)
    generator = _new_generator(pair, config.seed)
    history = WeightHistory(len(methods), config.rule, config.window) if spec.dynamic else None
    eos = pair.eos_token_ids
    clock = Clock(pair.device)
    session = TargetSession(pair.target)
    logits = session.prefill(prompt)
    first = choose_token(logits, logits_to_probs(logits, config.temperature, config.top_p),
                         config.temperature, generator)
    prefill_s = clock.elapsed()
    out = [first]
    first_event = TokenEvent(index=0, token_id=first, step_s=prefill_s, elapsed_s=prefill_s)
    yield first_event
    done = first in eos or config.max_new_tokens <= 1

    # Without an image every method's row is the same text-only prompt: draft it once, share it.
    drafted_methods = methods if images else ("T",)
    if not done:  # the drafter's image features and prefill are charged to the decode phase
        with torch.inference_mode():
            rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, draft_prompt, drafted_methods,
                              captions)
        for row in rows:
            _check_context(int(row.input_ids.shape[0]), config, pair.context_length, f"{row.method} row")
        drafter = BatchedDrafter(pair.drafter, rows, vocab_size=pair.vocab_size)
        drafter.prefill()
    pending = [first]  # committed tokens the drafter has not seen yet
    blocks: list[BlockEvent] = []
    stopped = False
    while not done:
        if stop is not None and stop.is_set():
            stopped = True
            break
        block_start = clock.now()
        weights = history.weights() if history is not None else uniform_weights(len(methods))
        weights_s = clock.now() - block_start
        gamma = min(config.gamma, config.max_new_tokens - len(out) - 1)

        # Draft: one batched drafter forward per position; every row is extended with the same token.
        draft: list[int] = []
        row_probs: list[torch.Tensor] = []  # per position (K, V)
        mixed_probs: list[torch.Tensor] = []  # per position (V,)
        feed = pending
        for _ in range(gamma):
            q_rows = logits_to_probs(drafter.step(feed), config.temperature, config.top_p)
            q_rows = q_rows.expand(len(methods), -1) if len(drafted_methods) < len(methods) else q_rows
            q = ensemble(q_rows, weights)
            token = int(q.argmax()) if greedy else int(torch.multinomial(q, 1, generator=generator))
            draft.append(token)
            row_probs.append(q_rows)
            mixed_probs.append(q)
            feed = [token]
        verify_start = clock.now()

        # Verify all drafts in one target forward, then roll both caches back to the accepted prefix.
        target_logits = session.forward([out[-1]] + draft)
        target_probs = logits_to_probs(target_logits, config.temperature, config.top_p)
        draft_tensor = torch.tensor(draft, dtype=torch.long, device=target_logits.device)
        if greedy:
            accepted, target_token = verify_greedy(draft_tensor, target_logits)
        else:
            q_stack = torch.stack(mixed_probs) if draft else target_probs[:0]
            accepted, target_token = verify_sampling(draft_tensor, q_stack, target_probs, generator)
        session.rollback(gamma - accepted)
        if gamma == 0:
            pending = pending + [target_token]
        elif accepted == gamma:
            pending = [draft[-1], target_token]
        else:
            drafter.rollback(gamma - 1 - accepted)
            pending = [target_token]
        verify_end = clock.now()

        # Ground truth for the ensemble and the per-method counterfactuals.
        truth = draft[:accepted] + [target_token]
        verified = min(accepted + 1, gamma)
        top1 = torch.stack(row_probs).argmax(-1).T.tolist() if row_probs else [[] for _ in methods]  # (K, γ)
        guesses = dict(zip(methods, top1, strict=True))
        if history is not None and verified:
            history.add(target_probs[:verified], torch.stack(row_probs[:verified]))
        weights_s += clock.now() - verify_end

        emitted, done = _cut(truth, config.max_new_tokens - len(out), eos)
        out.extend(emitted)
        index = torch.arange(gamma, device=target_probs.device)
        event = BlockEvent(
            index=len(blocks),
            weights={m: float(w) for m, w in zip(methods, weights, strict=True)},
            draft=draft,
            drafts=guesses,
            accepted=accepted,
            target_token=target_token,
            bonus=accepted == gamma,
            emitted=emitted,
            draft_probs=torch.stack(mixed_probs)[index, draft_tensor].tolist() if gamma else [],
            target_probs=target_probs[index, draft_tensor].tolist() if gamma else [],
            target_token_prob=float(target_probs[accepted, target_token]),
            method_accepted={m: _leading_matches(guesses[m][:gamma], truth) for m in methods},
            draft_s=verify_start - block_start,
            verify_s=verify_end - verify_start,
            weights_s=weights_s,
            elapsed_s=clock.now() - clock.start,
        )
        blocks.append(event)
        yield event

    walltime = clock.elapsed()
    decode_s = walltime - prefill_s
    emitted_in_blocks = len(out) - 1
    drafted = sum(len(b.draft) for b in blocks)
    per_method = {
        m: 1.0 + sum(b.method_accepted[m] for b in blocks) / len(blocks) if blocks else 0.0 for m in methods
    }
    metrics = Metrics(
        new_tokens=len(out),
        prefill_s=prefill_s,
        decode_s=decode_s,
        walltime_s=walltime + caption_s,
        tokens_per_s=len(out) / (walltime + caption_s) if walltime > 0 else 0.0,
        target_forwards=len(blocks),
        block_efficiency=emitted_in_blocks / len(blocks) if blocks else 0.0,
        acceptance_rate=sum(b.accepted for b in blocks) / drafted if drafted else 0.0,
        method_block_efficiency=per_method,
        draft_s=sum(b.draft_s for b in blocks),
        verify_s=sum(b.verify_s for b in blocks),
        weights_s=sum(b.weights_s for b in blocks),
        caption_s=caption_s,
    )
    result = GenerationResult(mode="speculative", spec=spec.name, token_ids=out, text=_text(pair, out),
                              metrics=metrics, blocks=blocks, tokens=[first_event], captions=captions,
                              notes=notes, stopped=stopped)
    yield Finished(result)


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


def warm_up(pair: ModelPair) -> None:
    """One tiny forward of each model, so that one-time costs do not land in the first timed run."""
    ids = torch.tensor([[pair.tokenizer.bos_token_id or 0] * 4], device=pair.device)
    with torch.inference_mode():
        pair.target(input_ids=ids, logits_to_keep=1)
        pair.drafter(input_ids=ids.expand(2, -1), logits_to_keep=1)
