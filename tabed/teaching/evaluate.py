"""The teaching pair on held-out dialogues: each model's accuracy, block efficiency, where its drafts
miss, step costs (`python -m tabed.teaching eval`)."""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import LlavaForConditionalGeneration, LlavaProcessor

from ..bench.overhead import draft_step_seconds, target_step_seconds
from ..engine.config import GenerationConfig
from ..engine.loop import collect, speculative_generate
from ..engine.spec import parse_spec
from ..models.chat import encode
from ..models.loading import load_pair
from ..models.pair import ModelPair
from . import facts, world
from .train import EVAL_SEED, dialogue_turns, log_line

ANSWER_TOKENS = 200  # the world's longest answers take about 185 tokens


def answer(model: LlavaForConditionalGeneration, processor: LlavaProcessor, dialogue: world.Dialogue,
           max_new_tokens: int = ANSWER_TOKENS) -> str:
    """Greedy answer of one model alone to the last question of a dialogue."""
    turns = dialogue_turns(dialogue, len(dialogue.exchanges) - 1)
    prompt = encode(processor, turns, model.device, model.dtype)
    with torch.inference_mode():
        out = model.generate(input_ids=prompt.input_ids, **prompt.image_inputs, max_new_tokens=max_new_tokens,
                             do_sample=False, pad_token_id=processor.tokenizer.pad_token_id)
    return processor.tokenizer.decode(out[0, prompt.length:], skip_special_tokens=True).strip()


def answers(model: LlavaForConditionalGeneration, processor: LlavaProcessor,
            dialogues: list[world.Dialogue]) -> list[str]:
    """Each dialogue's last answer by the model alone."""
    return [answer(model, processor, d) for d in dialogues]


def answers_right(model: LlavaForConditionalGeneration, processor: LlavaProcessor,
                  dialogues: list[world.Dialogue]) -> list[bool]:
    """Per dialogue: is the last answer exactly the world's answer?"""
    return exactly_right(answers(model, processor, dialogues), dialogues)


def exactly_right(given: list[str], dialogues: list[world.Dialogue]) -> list[bool]:
    return [text == d.exchanges[-1].answer for text, d in zip(given, dialogues, strict=True)]


def fact_scores(given: list[str], dialogues: list[world.Dialogue]) -> list[facts.Score]:
    """Each answer's facts against the world's answer (the world's own checker, `facts.py`)."""
    return [facts.check(text, d.exchanges[-1].answer) for text, d in zip(given, dialogues, strict=True)]


def share_right(right: list[bool]) -> float:
    return sum(right) / len(right) if right else float("nan")


def accuracy(model: LlavaForConditionalGeneration, processor: LlavaProcessor, dialogues: list[world.Dialogue]) -> float:
    """Share of dialogues whose last answer is exactly the world's answer."""
    return share_right(answers_right(model, processor, dialogues))


NEAR_TIE = 0.8  # a miss where the target's own token had less than this probability is at a wording near-tie


@dataclass(frozen=True)
class Decoded:
    """One greedy speculative answer, counted as the world's regime is judged: its decode-phase tokens,
    its target forwards, and the blocks whose drafts the target rejected (misses), of which how many fell
    where the target itself was unsure (a near-tie of the wording, not a fact the drafter got wrong)."""

    tokens: int
    forwards: int
    misses: int = 0
    near_tie_misses: int = 0


def block_counts(pair: ModelPair, dialogues: list[world.Dialogue], spec_name: str, gamma: int = 5,
                 max_new_tokens: int = ANSWER_TOKENS) -> list[Decoded]:
    """Each dialogue's last answer, greedy, with the engine's speculative loop, counted (`Decoded`)."""
    spec, config = parse_spec(spec_name), GenerationConfig(max_new_tokens=max_new_tokens, gamma=gamma)
    counts = []
    for dialogue in dialogues:
        turns = dialogue_turns(dialogue, len(dialogue.exchanges) - 1)
        result = collect(speculative_generate(pair, turns, spec, config))
        missed = [block for block in result.blocks if block.accepted < len(block.draft)]
        counts.append(Decoded(result.metrics.new_tokens - 1, result.metrics.target_forwards, len(missed),
                              sum(block.target_token_prob < NEAR_TIE for block in missed)))
    return counts


def tokens_per_forward(counts: list[Decoded]) -> float:
    """Block efficiency over several generations: all their tokens over all their target forwards."""
    forwards = sum(c.forwards for c in counts)
    return sum(c.tokens for c in counts) / forwards if forwards else 0.0


def miss_profile(counts: list[Decoded]) -> dict[str, float | None]:
    """How often the drafts miss (answer tokens per miss: a real pair's miss every 2-4 tokens) and the share
    of misses at near-ties; None where nothing missed."""
    misses = sum(c.misses for c in counts)
    if not misses:
        return {"tokens_per_miss": None, "near_tie_share": None}
    return {"tokens_per_miss": sum(c.tokens for c in counts) / misses,
            "near_tie_share": sum(c.near_tie_misses for c in counts) / misses}


def block_efficiency(pair: ModelPair, dialogues: list[world.Dialogue], spec_name: str, gamma: int = 5,
                     max_new_tokens: int = ANSWER_TOKENS) -> float:
    """Tokens per target forward over a split (pooled), greedy, with the engine's speculative loop."""
    return tokens_per_forward(block_counts(pair, dialogues, spec_name, gamma, max_new_tokens))


def step_milliseconds(pair: ModelPair, steps: int = 24, rounds: int = 3) -> dict[str, float]:
    """Milliseconds of one decoding step: the target alone, the drafter with 1 (M) and 2 (M, T) rows."""
    turns = dialogue_turns(world.split("image", EVAL_SEED, 1)[0], 0)
    samples: dict[str, list[float]] = {"target_ms": [], "drafter_ms": [], "drafter_k2_ms": []}
    for _ in range(rounds):
        samples["target_ms"].append(target_step_seconds(pair, turns, 1, steps) * 1e3)
        samples["drafter_ms"].append(draft_step_seconds(pair, turns, ("M",), steps) * 1e3)
        samples["drafter_k2_ms"].append(draft_step_seconds(pair, turns, ("M", "T"), steps) * 1e3)
    return {name: statistics.median(values) for name, values in samples.items()}


def eval_command(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    folder = Path(args.models)
    pair = load_pair(str(folder / "target"), str(folder / "drafter"), device=args.device, dtype="float32",
                     name="teaching")
    splits = {s: world.split(s, EVAL_SEED, args.cases) for s in world.SCENARIOS}
    report: dict = {"cases_per_scenario": args.cases, "threads": torch.get_num_threads(),
                    "step_costs": step_milliseconds(pair), "accuracy": {}, "fact_accuracy": {},
                    "block_efficiency": {}, "misses": {}}
    log_line(f"cost per step: {report['step_costs']}")
    given = {role: {s: answers(model, processor, d) for s, d in splits.items()}
             for role, model, processor in (("target", pair.target, pair.target_processor),
                                            ("drafter", pair.drafter, pair.drafter_processor))}
    right = {role: {s: exactly_right(g, splits[s]) for s, g in per_scenario.items()}
             for role, per_scenario in given.items()}
    for role in given:
        report["accuracy"][role] = {s: share_right(r) for s, r in right[role].items()}
        report["fact_accuracy"][role] = {s: facts.share_true(fact_scores(g, splits[s]))
                                         for s, g in given[role].items()}
        log_line(f"accuracy of the {role}: exact {report['accuracy'][role]}, facts {report['fact_accuracy'][role]}")
    counts = {}
    for scenario, dialogues in splits.items():
        counts[scenario] = {spec: block_counts(pair, dialogues, spec) for spec in args.drafting.split(",")}
        report["block_efficiency"][scenario] = {spec: tokens_per_forward(c) for spec, c in counts[scenario].items()}
        report["misses"][scenario] = {spec: miss_profile(c) for spec, c in counts[scenario].items()}
        log_line(f"block efficiency, {scenario}: "
            + ", ".join(f"{k} {v:.2f}" for k, v in report["block_efficiency"][scenario].items()))
        log_line(f"misses, {scenario}: {report['misses'][scenario]}")
    # The drafter's reading breaks down as odd pictures add up: the odd split by number of pictures.
    report["odd_by_pictures"] = {}
    for n in sorted({len(d.scenes) for d in splits["odd"]}):
        chosen = [i for i, d in enumerate(splits["odd"]) if len(d.scenes) == n]
        report["odd_by_pictures"][n] = {
            "cases": len(chosen),
            **{f"{role}_accuracy": share_right([right[role]["odd"][i] for i in chosen]) for role in right},
            "block_efficiency": {spec: tokens_per_forward([c[i] for i in chosen]) for spec, c in counts["odd"].items()},
        }
    log_line(f"odd, by number of pictures: {report['odd_by_pictures']}")
    print(json.dumps(report, indent=2))
    return 0
