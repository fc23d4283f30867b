"""Command line: `python -m tabed generate ...` (see `python -m tabed generate --help`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields

import torch

from .engine.config import LIMITS, TREE_BLOCKS, TREE_POLICIES, GenerationConfig
from .engine.draft_length import AUTO_CAP
from .engine.loop import autoregressive_generate, collect, compare, speculative_generate, warm_up
from .engine.settings import Settings
from .engine.spec import DEFAULT_SPEC, RULES
from .engine.speed import REPEATS, Repeats, answer_speed, differing_runs, repeats_record
from .errors import TabedError
from .models.caches import CACHES
from .models.chat import Turn, load_image, validate
from .models.loading import load_pair, load_preset, skip_cudnn_attention
from .models.presets import PRESETS

BENCH_SPECS = ",".join(dict.fromkeys(["M", "T", "MT", "tabed-MT@5+tree1", DEFAULT_SPEC]))  # always the default spec;
# the paper's setting is a chain in every block
DEFAULTS = GenerationConfig()
GAMMA_HELP = (f"draft tokens per block: 'auto' (default: adaptive, at most {AUTO_CAP}; drafting stops early when "
              "the ensemble is unsure), 'auto:N' (adaptive, at most N) or N (always N, the paper's setting)")


def _add_generate(sub) -> None:
    p = sub.add_parser("generate", help="answer a prompt (about an image) with TABED speculative decoding")
    p.add_argument("--image", action="append",
                   help="image file, shown with the first prompt; give it again for several pictures; "
                        "without it the prompt is text-only")
    p.add_argument("--prompt", action="append", required=True,
                   help="the question; give it again for a follow-up turn on the same conversation")
    _add_pair_arguments(p)
    d = p.add_argument_group("drafting and decoding")
    d.add_argument("--drafting", default=DEFAULT_SPEC,
                   help=f"M, T, C, P, MT, MTCP, tabed-MT, ... (default: {DEFAULT_SPEC})")
    d.add_argument("--rule", default=DEFAULTS.rule, choices=RULES, help=f"TABED weight rule (default: {DEFAULTS.rule})")
    d.add_argument("--window", type=int, default=DEFAULTS.window, help="TABED history window in positions, 0 = all")
    _add_shared_arguments(d)
    d.add_argument("--top-p", type=float, default=DEFAULTS.top_p)
    p.add_argument("--compare-ar", action="store_true", help="also decode with the target alone and time both")
    p.add_argument("--repeat", type=int, default=1,
                   help=f"with --compare-ar: plain decoding and TABED run this many times each, in turn "
                        f"({REPEATS[0]}-{REPEATS[1]}); the median run's figures are reported, with the range")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _add_shared_arguments(p) -> None:
    """The settings `generate` and `bench` share, with the config's defaults and bounds."""
    p.add_argument("--gamma", default="auto", help=GAMMA_HELP)
    low, high = LIMITS["max_new_tokens"]
    p.add_argument("--max-new-tokens", type=int, default=DEFAULTS.max_new_tokens,
                   help=f"{low} to {high} (default: {DEFAULTS.max_new_tokens})")
    p.add_argument("--temperature", type=float, default=DEFAULTS.temperature,
                   help=f"0 = greedy (default), up to {LIMITS['temperature'][1]}")
    p.add_argument("--seed", type=int, default=DEFAULTS.seed)
    p.add_argument("--tree-width", type=int, default=DEFAULTS.tree_width,
                   help="1 (default): a chain of drafts per block; 2-4: a token tree that expands this many "
                        "nodes per depth, verified in one target forward")
    p.add_argument("--tree-policy", default=DEFAULTS.tree_policy, choices=TREE_POLICIES,
                   help="with a tree width above 1, a tree node's children: the ensemble's top tokens (default), "
                        "each method's own top-1, the top tokens only where the top one has under half the "
                        "ensemble's probability, or 'members': the ensemble's own chain and each method's own, "
                        "whatever the width")
    p.add_argument("--tree-blocks", default=DEFAULTS.tree_blocks, choices=TREE_BLOCKS,
                   help="which blocks draft trees: every block (default) or the first only, which is drafted "
                        "before any weight is learned")
    p.add_argument("--no-hedge-first", dest="hedge_first", action="store_false",
                   help="draft TABED's first block as a plain chain; by default, with a picture and a tree width of "
                        "1, it forks (a width-2 tree) where the methods leave the ensemble unsure")
    p.add_argument("--no-resting", dest="may_rest", action="store_false",
                   help="keep every method's drafter row in every draft step, even at weight 0")
    p.add_argument("--inspect", action="store_true",
                   help="record what each block decided and why: per verified position the methods', the "
                        "ensemble's and the target's top tokens and the test the draft met (`positions` in "
                        "the JSON), and how the weights were chosen (`weight_update`)")


def _config(args: argparse.Namespace) -> dict:
    """The options that are config fields, by the config's names (`--max-new-tokens` is `max_new_tokens`);
    the draft length is `--gamma`'s grammar, read by `Settings.parse`."""
    return {f.name: getattr(args, f.name) for f in fields(GenerationConfig)
            if f.name not in ("gamma", "adaptive") and hasattr(args, f.name)}


def _add_pair_arguments(p) -> None:
    pair = p.add_argument_group("model pair (default: $TABED_PRESET or the bundled teaching pair)")
    pair.add_argument("--preset", choices=sorted(PRESETS))
    pair.add_argument("--target", help="target model: hub id or local folder")
    pair.add_argument("--drafter", help="drafter model: hub id or local folder")
    pair.add_argument("--device", help="cuda, cuda:1, cpu, ... (default: cuda if present)")
    pair.add_argument("--dtype", help="float16, bfloat16 or float32 (default: fp16 on CUDA, fp32 on CPU)")
    pair.add_argument("--cache", choices=CACHES,
                      help="KV caches: static (CUDA graphs on a GPU) or dynamic (default: static on CUDA)")


def _add_overhead(sub) -> None:
    p = sub.add_parser("overhead", help="time a target step, a verify and draft steps: K = 1, 2, 4 batched rows, "
                                        "and where a second row's cost goes")
    p.add_argument("--image", help="image file (default: a plain grey picture)")
    p.add_argument("--prompt", default="Describe the image.")
    p.add_argument("--steps", type=int, default=16, help="steps timed per kind, the first two to warm up (default: 16)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the K and row timings (default: 3)")
    p.add_argument("--gamma", type=int, default=5, help="draft length of the timed verify (default: 5)")
    _add_pair_arguments(p)


def _add_bench(sub) -> None:
    p = sub.add_parser("bench", help="block efficiency and walltime per scenario and spec, against AR and a peer")
    p.add_argument("--suite", help="JSONL suite of cases (default: assets/bench/teaching.jsonl)")
    p.add_argument("--drafting", default=BENCH_SPECS, help=f"comma-separated specs (default: {BENCH_SPECS})")
    _add_shared_arguments(p)
    p.add_argument("--limit", type=int, help="at most this many cases per scenario")
    p.add_argument("--repeat", type=int, default=1,
                   help="run each case's specs this many times in turn and take each time's median (default 1): "
                        "steadier ratios on a busy or small machine")
    p.add_argument("--peer", action="store_true", help="also time transformers' assisted generation")
    p.add_argument("--no-overhead", action="store_true", help="skip the batched-drafting overhead measurement")
    p.add_argument("--out", required=True, help="folder for report.json, report.md and report.html")
    _add_pair_arguments(p)


def _add_widen(sub) -> None:
    p = sub.add_parser("widen", help="write a function-preserving widening of a LLaVA (Llama) checkpoint")
    p.add_argument("--model", required=True, help="the LLaVA checkpoint folder (or hub id) to widen")
    p.add_argument("--hidden", type=int, required=True, help="hidden size")
    p.add_argument("--layers", type=int, required=True, help="decoder layers")
    p.add_argument("--heads", type=int, required=True, help="attention heads (head size = hidden / heads)")
    p.add_argument("--intermediate", type=int, required=True, help="MLP width")
    p.add_argument("--vocab", type=int, help="vocabulary size (default: unchanged); extra tokens are suppressed")
    p.add_argument("--dtype", default="float32", help="float32 (default), float16 or bfloat16")
    p.add_argument("--out", required=True, help="folder to write the widened checkpoint to")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tabed", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_generate(sub)
    _add_overhead(sub)
    _add_bench(sub)
    _add_widen(sub)
    return parser


def _load(args, quiet: bool = False):
    if (args.target is None) != (args.drafter is None):
        raise TabedError("give both --target and --drafter, or a --preset")
    if args.target and args.preset:
        raise TabedError("give either --preset or --target/--drafter, not both")
    progress = None if quiet else (lambda line: print(f"[tabed] {line}", file=sys.stderr))
    options = {"device": args.device, "dtype": args.dtype, "cache": args.cache, "progress": progress}
    if args.target:
        return load_pair(args.target, args.drafter, **options)
    return load_preset(args.preset, **options)


def generate(args: argparse.Namespace) -> dict:
    settings = Settings.parse(args.drafting, args.gamma, **_config(args))
    spec, config = settings.spec, settings.config
    images = [load_image(path) for path in args.image or []]
    last = len(args.prompt) - 1  # checked before the models load: earlier turns will have their answers
    validate([Turn(prompt, images if i == 0 else [], None if i == last else "")
              for i, prompt in enumerate(args.prompt)])
    if not REPEATS[0] <= args.repeat <= REPEATS[1]:
        raise TabedError(f"--repeat must be from {REPEATS[0]} to {REPEATS[1]}, got {args.repeat}")
    if args.repeat > 1 and not args.compare_ar:
        raise TabedError("--repeat repeats the comparison with plain decoding: give --compare-ar too")
    pair = _load(args, quiet=args.json)
    turns: list[Turn] = []
    for index, prompt in enumerate(args.prompt):  # earlier turns are answered by the same decoder
        if turns:
            turns[-1].answer = collect(speculative_generate(pair, turns, spec, config)).text
        turns.append(Turn(prompt, images if index == 0 else []))
    if not args.compare_ar:
        return _report(collect(speculative_generate(pair, turns, spec, config)), pair, turns)
    warm_up(pair)
    runs = []
    for _ in range(args.repeat):  # in turn, so that the machine's changes reach both sides alike
        ar = collect(autoregressive_generate(pair, turns, config))
        runs.append((collect(speculative_generate(pair, turns, spec, config)), ar))
    spread = Repeats.of([(ours.metrics, plain.metrics) for ours, plain in runs])
    result, ar = runs[spread.median_run if spread is not None else 0]
    compare(result, ar)
    report = _report(result, pair, turns, ar)
    if args.repeat > 1:  # runs numbered from 1, as the summary says them
        differing = differing_runs([(ours.token_ids, plain.token_ids) for ours, plain in runs])
        report["repeats"] = repeats_record(spread, args.repeat, len(runs), differing if not config.temperature else [])
    return report


def _report(result, pair, turns: list[Turn], ar=None) -> dict:
    """The answer's record (`GenerationResult.to_dict`), its pair and turns, and plain decoding's when it ran."""
    report = result.to_dict()
    report["pair"] = pair.name
    report["device"] = str(pair.device)
    report["dtype"] = str(pair.dtype).removeprefix("torch.")
    report["turns"] = [{"prompt": t.text, "images": len(t.images), "answer": t.answer} for t in turns]
    if ar is not None:
        report["ar"] = {
            "token_ids": ar.token_ids,
            "text": ar.text,
            "walltime_s": ar.metrics.walltime_s,
            "decode_s": ar.metrics.decode_s,
            "tokens_per_s": ar.metrics.tokens_per_s,
            "busy": ar.metrics.busy,
        }
        report["same_output"] = ar.token_ids == result.token_ids
        speed = answer_speed(result.metrics, ar.metrics)
        if speed is not None and report["same_output"] and not (result.metrics.busy or ar.metrics.busy):
            report["why"] = speed.sentence()  # what the speedup is made of (engine/speed.py)
    return report


def overhead(args: argparse.Namespace) -> dict:
    from PIL import Image

    from .bench.machine import describe_machine
    from .bench.overhead import WARM_STEPS, batching_overhead, row_costs, step_costs

    if args.steps < WARM_STEPS + 1:
        raise TabedError(f"--steps must be at least {WARM_STEPS + 1} (the first {WARM_STEPS} warm up), "
                         f"got {args.steps}")
    if args.rounds < 1:
        raise TabedError(f"--rounds must be at least 1, got {args.rounds}")
    GenerationConfig(gamma=args.gamma)  # the bounds a run's draft length has
    image = load_image(args.image) if args.image else Image.new("RGB", (336, 336), (128, 128, 128))
    pair = _load(args)
    warm_up(pair)
    turns = [Turn(args.prompt, [image])]
    ratios = batching_overhead(pair, turns, steps=args.steps, rounds=args.rounds)
    return {"pair": pair.name, "device": str(pair.device), "cache": pair.cache,
            "machine": describe_machine(pair.device, pair.linears, pair.compiled_roles),
            **{str(k): v for k, v in ratios.items()},
            **step_costs(pair, turns, args.gamma, args.steps),
            "row_ms": row_costs(pair, turns, steps=args.steps, rounds=args.rounds), "notes": pair.notes}


def bench(args: argparse.Namespace) -> dict:
    from pathlib import Path

    from .bench.runner import BenchSettings, check_settings, log, run_bench
    from .bench.suite import default_suite

    if args.limit is not None and args.limit < 1:
        raise TabedError(f"--limit must be at least 1, got {args.limit}")
    config = Settings.parse(gamma=args.gamma, **_config(args)).config
    settings = BenchSettings(Path(args.suite) if args.suite else default_suite(),
                             [s.strip() for s in args.drafting.split(",") if s.strip()], config, Path(args.out),
                             peer=args.peer, limit=args.limit, overhead=not args.no_overhead, repeat=args.repeat)
    check_settings(settings)
    pair = _load(args)
    report = run_bench(pair, settings, progress=log)
    log(f"reports in {settings.out}/report.{{json,md,html}}")
    return report


def widen_command(args: argparse.Namespace) -> dict:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from .models.loading import check_source
    from .models.pair import resolve_dtype
    from .models.widen import Shape, widen

    source = check_source(args.model, "model")
    try:
        model = AutoModelForImageTextToText.from_pretrained(source, dtype=torch.float32)
        processor = AutoProcessor.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise TabedError(f"cannot load {args.model!r}: {str(exc).splitlines()[0]}") from None
    shape = Shape(args.hidden, args.layers, args.heads, args.intermediate, args.vocab)
    big = widen(model, shape, device="cpu", dtype=resolve_dtype(args.dtype, torch.device("cpu")))
    big.save_pretrained(args.out)
    processor.save_pretrained(args.out)
    parameters = sum(p.numel() for p in big.parameters())
    return {"model": args.model, "out": args.out, "parameters": parameters, **vars(shape)}


def _summary(report: dict) -> str:
    m = report["metrics"]
    parts = [
        f"{report['spec']}: {m['new_tokens']} tokens",
        f"block efficiency {m['block_efficiency']:.2f}",
        f"acceptance {m['acceptance_rate']:.0%}",
        f"{m['tokens_per_s']:.1f} tok/s",
        f"weights {m['weights_s'] / m['decode_s']:.1%} of decode" if m["decode_s"] > 0 else "",
    ]
    if "ar" in report:
        repeats = report.get("repeats", {})
        over = (f" (the median of {len(repeats['speedups'])} runs, {min(repeats['speedups']):.2f}-"
                f"{max(repeats['speedups']):.2f}x)" if len(repeats.get("speedups", [])) > 1 else "")
        parts.append(f"AR {report['ar']['tokens_per_s']:.1f} tok/s, speedup {m['speedup']:.2f}x{over}")
        if repeats.get("differing"):
            parts.append(f"run {', '.join(map(str, repeats['differing']))} answered differently from run 1: a bug, "
                         "please report it")
        parts.append(f"why: {report['why']}" if "why" in report else "")
    if m["busy"] or report.get("ar", {}).get("busy"):
        parts.append("timings unreliable: the machine was busy (run again when it is idle)")
    return " | ".join(part for part in parts if part)


def _conversation(report: dict) -> str:
    """The answer alone for one prompt (to pipe on); with follow-ups, every prompt and its answer in turn."""
    turns = report["turns"]
    if len(turns) == 1:
        return report["text"]
    answers = [turn["answer"] for turn in turns[:-1]] + [report["text"]]
    return "\n\n".join(f"> {turn['prompt']}\n{answer}" for turn, answer in zip(turns, answers, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    skip_cudnn_attention()  # process-wide, as an entry point may: why in its docstring
    try:
        if args.command == "widen":
            print(json.dumps(widen_command(args), indent=2))
            return 0
        if args.command == "overhead":
            report = overhead(args)
            print(json.dumps(report, indent=2))
            return 0
        if args.command == "bench":
            report = bench(args)
            print(json.dumps({"scenarios": {name: {spec: {k: row[k] for k in ("block_efficiency", "speedup_vs_ar",
                                                                                "mismatches")}
                                                   for spec, row in s["specs"].items()}
                                            for name, s in report["scenarios"].items()}}, indent=2))
            return 0
        report = generate(args)
    except TabedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    if args.json:
        print(json.dumps(report))
    else:
        print(_conversation(report))
        for note in report["notes"]:
            print(f"note: {note}", file=sys.stderr)
        print(_summary(report), file=sys.stderr)
    return 0
