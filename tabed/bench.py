"""`python -m tabed bench`: the paper's Table 1 for any pair, and walltime against plain decoding and a peer.

For every case of a suite and every drafting spec, the target decodes the case alone (AR) and then
speculatively (SD), back to back, after a warm-up: drift hits both sides alike. Greedy runs also
check that SD gave AR's tokens. The peer is transformers' own assisted generation
(`generate(assistant_model=drafter)`) on the same pair and cases, timed the same way.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from .conversation import Turn, encode, load_image
from .decoding import Clock, GenerationConfig, autoregressive_generate, collect, speculative_generate, warm_up
from .draft_length import parse_gamma
from .errors import InputError
from .events import GenerationResult
from .models import ModelPair
from .sampling import is_greedy
from .spec import DEFAULT_SPEC, DraftingSpec, parse_spec
from .tree import TREE_BLOCKS

PEERS = ("peer-default", "peer-gamma5", "peer-lookup")  # transformers: as it comes, the paper's γ, prompt lookup
PEER_NOTE = ("peers: transformers assisted generation, `target.generate(assistant_model=drafter)`: `peer-default` "
             "exactly as it comes (the drafter's generation config: in transformers 5, 20 draft tokens, constant "
             "schedule, drafting stops when the drafter's confidence falls below 0.4), `peer-gamma5` with 5 draft "
             "tokens per block and a constant schedule, no confidence stop (the paper's setting), `peer-lookup` prompt "
             "lookup decoding (`prompt_lookup_num_tokens=5`, no drafter; where transformers refuses a case, e.g. "
             "image inputs in 5.23, the case is counted as failed and the peer is left out of that scenario's "
             "comparison). In transformers 5 "
             "a vision-language assistant drafts without the image: the peers' drafter is image-blind, like T. "
             "Their block efficiency is tokens per target forward, the prefill included. speedup_vs_peer is "
             "against the fastest peer that ran every case of the scenario.")


def is_peer(spec: str) -> bool:
    return spec in PEERS


# ---------------------------------------------------------------- suites


@dataclass
class Case:
    """One benchmark case: a conversation whose last user turn is the one decoded and timed."""

    id: str
    scenario: str
    images: list[str]  # paths, relative to the suite file
    turns: list[dict]  # {"prompt": str, "answer": str}; the last has no answer


def load_suite(path: str | Path) -> list[Case]:
    """Read a JSONL suite; each line is {"id", "scenario", "images": [...], "turns": [...]}.

    A turn is a prompt string or {"prompt", "answer"}; every turn but the last needs its answer,
    so that each spec decodes the same conversation."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"suite not found: {path}")
    cases = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            turns = [t if isinstance(t, dict) else {"prompt": t} for t in row["turns"]]
            case = Case(str(row["id"]), str(row["scenario"]), list(row.get("images") or []), turns)
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"{path}:{number}: not a suite case ({exc})") from None
        if not case.turns or any("prompt" not in t for t in case.turns):
            raise InputError(f"{path}:{number}: every turn needs a prompt")
        if any(not t.get("answer") for t in case.turns[:-1]):
            raise InputError(f"{path}:{number}: every turn but the last needs its answer")
        for image in case.images:
            if not (path.parent / image).is_file():
                raise InputError(f"{path}:{number}: image not found: {image}")
        cases.append(case)
    if not cases:
        raise InputError(f"suite {path} has no cases")
    return cases


def limit_cases(cases: list[Case], per_scenario: int | None) -> list[Case]:
    """The first `per_scenario` cases of each scenario, in suite order."""
    if per_scenario is None:
        return cases
    seen: dict[str, int] = {}
    kept = []
    for case in cases:
        seen[case.scenario] = seen.get(case.scenario, 0) + 1
        if seen[case.scenario] <= per_scenario:
            kept.append(case)
    return kept


def case_turns(case: Case, root: Path) -> list[Turn]:
    images = [load_image(root / image) for image in case.images]
    return [Turn(t["prompt"], images if i == 0 else [], t.get("answer")) for i, t in enumerate(case.turns)]


# ---------------------------------------------------------------- one run


@dataclass
class Run:
    """One case decoded with one spec, and by the target alone just before it."""

    case: str
    scenario: str
    spec: str
    new_tokens: int
    target_forwards: int
    emitted: int  # tokens the target forwards account for (block efficiency = emitted / forwards)
    accepted: int = 0
    drafted: int = 0
    walltime_s: float = 0.0
    draft_s: float = 0.0
    verify_s: float = 0.0
    weights_s: float = 0.0
    decode_s: float = 0.0
    ar_walltime_s: float = 0.0
    ar_decode_s: float = 0.0
    mismatch: bool = False
    error: str = ""  # a peer that refused the case says why; its run is left out of the sums


def bench_spec(text: str, config: GenerationConfig) -> tuple[DraftingSpec, GenerationConfig]:
    """A bench row: a drafting spec, optionally with its own weight rule after '/' (`tabed-MT/hedge`), its
    own draft length after '@' (`tabed-MT@5`: always 5 tokens, the paper's setting; `tabed-MT@auto:8`)
    and its own token trees after '+tree' (`tabed-MT+tree2`: width 2; `tabed-MT+tree2:methods`: and the
    "methods" policy; `tabed-MT+tree2:first`: in the first block only; `tabed-MT+tree1`: chains in every
    block, no hedged first block either); else the bench's."""
    text, _, tree = text.partition("+tree")
    if tree:
        width, *options = tree.split(":")
        if not width.isdigit():
            raise InputError(f"bench row {text}+tree{tree}: give the tree width as a number, e.g. +tree2")
        blocks = [option for option in options if option in TREE_BLOCKS]
        policies = [option for option in options if option not in TREE_BLOCKS]
        config = replace(config, tree_width=int(width), tree_policy=policies[-1] if policies else config.tree_policy,
                         tree_blocks=blocks[-1] if blocks else config.tree_blocks, hedge_first=False)  # checks them
    name, _, gamma = text.partition("@")
    name, _, rule = name.partition("/")
    if rule:
        config = replace(config, rule=rule)
    if gamma:
        length, adaptive = parse_gamma(gamma)
        config = replace(config, gamma=length, adaptive=adaptive)
    return parse_spec(name), config


def _sd_run(pair: ModelPair, case: Case, turns: list[Turn], spec: str, config: GenerationConfig,
            ar: GenerationResult) -> Run:
    result = collect(speculative_generate(pair, turns, *bench_spec(spec, config)))
    m = result.metrics
    accepted = sum(block.accepted for block in result.blocks)
    drafted = sum(len(block.draft) for block in result.blocks)
    return Run(case.id, case.scenario, spec, m.new_tokens, m.target_forwards, max(0, m.new_tokens - 1),
               accepted, drafted, m.walltime_s, m.draft_s, m.verify_s, m.weights_s, m.decode_s,
               ar.metrics.walltime_s, ar.metrics.decode_s,
               mismatch=is_greedy(config.temperature) and result.token_ids != ar.token_ids)


PEER_SETTINGS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


def peer_generate(pair: ModelPair, turns: list[Turn], config: GenerationConfig,
                  peer: str = "peer-default") -> tuple[list[int], float, int]:
    """Transformers' assisted generation on the pair: token ids, walltime, target forwards."""
    prompt = encode(pair.target_processor, turns, pair.device, pair.dtype)
    forwards = []
    hook = pair.target.register_forward_pre_hook(lambda *_: forwards.append(1))
    settings = pair.drafter.generation_config
    saved = tuple(getattr(settings, name) for name in PEER_SETTINGS)
    if peer == "peer-gamma5":
        settings.num_assistant_tokens, settings.num_assistant_tokens_schedule = 5, "constant"
        settings.assistant_confidence_threshold = 0.0
    drafting = {"prompt_lookup_num_tokens": 5} if peer == "peer-lookup" else {"assistant_model": pair.drafter}
    sample = not is_greedy(config.temperature)
    options = {"do_sample": True, "temperature": config.temperature, "top_p": config.top_p} if sample else {
        "do_sample": False}
    try:
        if sample:
            torch.manual_seed(config.seed)
        clock = Clock(pair.device)
        with torch.inference_mode():
            out = pair.target.generate(
                input_ids=prompt.input_ids, attention_mask=torch.ones_like(prompt.input_ids), **prompt.image_inputs,
                **drafting, max_new_tokens=config.max_new_tokens,
                pad_token_id=pair.tokenizer.pad_token_id, **options)
        seconds = clock.elapsed()
    finally:
        hook.remove()
        for name, value in zip(PEER_SETTINGS, saved, strict=True):
            setattr(settings, name, value)
    return out[0, prompt.length:].tolist(), seconds, len(forwards)


def _peer_run(pair: ModelPair, case: Case, turns: list[Turn], config: GenerationConfig,
              ar: GenerationResult, peer: str) -> Run:
    """The peer's prefill cannot be told apart from its decoding: its decode time is its walltime."""
    try:
        ids, seconds, forwards = peer_generate(pair, turns, config, peer)
    except Exception as exc:  # noqa: BLE001 - a peer's own failure is a result to report, not a crash
        message = " ".join(str(exc).split())[:200] or type(exc).__name__
        return Run(case.id, case.scenario, peer, 0, 0, 0, error=f"{type(exc).__name__}: {message}")
    return Run(case.id, case.scenario, peer, len(ids), forwards, len(ids), walltime_s=seconds, decode_s=seconds,
               ar_walltime_s=ar.metrics.walltime_s, ar_decode_s=ar.metrics.walltime_s,
               mismatch=is_greedy(config.temperature) and ids != ar.token_ids)


def run_case(pair: ModelPair, case: Case, root: Path, specs: list[str], config: GenerationConfig,
             peer: bool, repeat: int = 1) -> list[Run]:
    """Each spec (and the peer) right after its own AR run on the same case; with `repeat`, all of them
    that many times in turn, each spec's times the medians of its repeats."""
    turns = case_turns(case, root)
    every = [*specs, *(PEERS if peer else ())]
    repeats: dict[str, list[Run]] = {spec: [] for spec in every}
    for _ in range(repeat):
        for spec in every:
            ar = collect(autoregressive_generate(pair, turns, config))
            if is_peer(spec):
                repeats[spec].append(_peer_run(pair, case, turns, config, ar, spec))
            else:
                repeats[spec].append(_sd_run(pair, case, turns, spec, config, ar))
    return [median_run(repeats[spec]) for spec in every]


TIMED = ("walltime_s", "draft_s", "verify_s", "weights_s", "decode_s", "ar_walltime_s", "ar_decode_s")


def median_run(runs: list[Run]) -> Run:
    """One case's repeats of one spec as one run: each time the median of its repeats (a moment when the
    machine was busy moves none of them), the counts of the first, and a mismatch or error if any had one."""
    first = runs[0]
    times = {name: statistics.median(getattr(r, name) for r in runs) for name in TIMED}
    return replace(first, **times, mismatch=any(r.mismatch for r in runs),
                   error=next((r.error for r in runs if r.error), ""))


# ---------------------------------------------------------------- statistics


def pooled(numerators: Iterable[float], denominators: Iterable[float]) -> float:
    """Sum over sum (e.g. tokens per target forward over a whole scenario); 0 when nothing was counted."""
    top, bottom = sum(numerators), sum(denominators)
    return top / bottom if bottom else 0.0


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def best_of(scores: dict[str, float]) -> list[str]:
    """The names with the highest score (all of them when tied)."""
    if not scores:
        return []
    top = max(scores.values())
    return [name for name, value in scores.items() if value == top]


SUMMED = ("walltime_s", "ar_walltime_s", "ar_decode_s", "draft_s", "verify_s", "weights_s", "decode_s", "new_tokens")


def summarize(runs: list[Run]) -> dict:
    """Per scenario and spec: block efficiency, acceptance, speedups, mismatches, times."""
    scenarios: dict[str, dict] = {}
    for scenario in dict.fromkeys(r.scenario for r in runs):
        rows = {}
        for spec in dict.fromkeys(r.spec for r in runs if r.scenario == scenario):
            every = [r for r in runs if r.scenario == scenario and r.spec == spec]
            mine = [r for r in every if not r.error]
            rows[spec] = {
                "cases": len(mine),
                "failed": len(every) - len(mine),
                "errors": list(dict.fromkeys(r.error for r in every if r.error))[:3],
                "block_efficiency": pooled((r.emitted for r in mine), (r.target_forwards for r in mine)),
                "acceptance_rate": pooled((r.accepted for r in mine), (r.drafted for r in mine)),
                "speedup_vs_ar": pooled((r.ar_decode_s for r in mine), (r.decode_s for r in mine)),
                "walltime_speedup_vs_ar": pooled((r.ar_walltime_s for r in mine), (r.walltime_s for r in mine)),
                "mismatches": sum(r.mismatch for r in mine),
                **{name: sum(getattr(r, name) for r in mine) for name in SUMMED},
            }
        peers = [row["walltime_s"] for p, row in rows.items() if is_peer(p) and not row["failed"]]
        for row in rows.values() if peers else ():
            row["speedup_vs_peer"] = pooled([min(peers)], [row["walltime_s"]])
        scenarios[scenario] = {
            "specs": rows,
            "best_block_efficiency": best_of({s: r["block_efficiency"] for s, r in rows.items() if not is_peer(s)}),
        }
    specs = list(dict.fromkeys(r.spec for r in runs))
    average = {spec: {key: mean(s["specs"][spec][key] for s in scenarios.values() if spec in s["specs"])
                      for key in ("block_efficiency", "speedup_vs_ar")} for spec in specs}
    return {"scenarios": scenarios, "average": average, "overall": overall(scenarios)}


def _best_peer_walltime(scenario: dict) -> float | None:
    """The fastest peer that ran every case of the scenario (None without one)."""
    times = [r["walltime_s"] for p, r in scenario["specs"].items() if is_peer(p) and not r["failed"]]
    return min(times) if times else None


def overall(scenarios: dict) -> dict:
    """Per spec over every scenario: decode and walltime speedup over AR, and speed against the best peer
    of each scenario (summed seconds, so that long scenarios weigh what they cost)."""
    out = {}
    best = [_best_peer_walltime(s) for s in scenarios.values()]
    for spec in dict.fromkeys(spec for s in scenarios.values() for spec in s["specs"]):
        rows = [s["specs"][spec] for s in scenarios.values() if spec in s["specs"]]
        out[spec] = {"speedup_vs_ar": pooled((r["ar_decode_s"] for r in rows), (r["decode_s"] for r in rows)),
                     "walltime_speedup_vs_ar": pooled((r["ar_walltime_s"] for r in rows),
                                                      (r["walltime_s"] for r in rows))}
        out[spec]["failed"] = sum(r["failed"] for r in rows)
        if len(rows) == len(scenarios) and not out[spec]["failed"] and None not in best:
            out[spec]["speedup_vs_peer"] = pooled(best, (s["specs"][spec]["walltime_s"] for s in scenarios.values()))
    return out


def goals(summary: dict, tabed: str = DEFAULT_SPEC, singles: tuple[str, ...] = ("M", "T")) -> list[dict]:
    """The project's goals for the teaching pair (issue 13), each with its measured value, where the specs
    allow: `tabed` is the default spec."""
    scenarios, average = summary["scenarios"], summary["average"]
    if not scenarios or any(tabed not in s["specs"] or any(m not in s["specs"] for m in singles)
                            for s in scenarios.values()):
        return []
    mine = {name: s["specs"][tabed] for name, s in scenarios.items()}
    whole = summary["overall"][tabed]
    worst = min(mine[name]["block_efficiency"] / max(s["specs"][m]["block_efficiency"] for m in singles)
                for name, s in scenarios.items())
    base = mean(average[m]["block_efficiency"] for m in singles)
    gain = average[tabed]["block_efficiency"] / base - 1 if base else 0.0
    slowest = min(mine.values(), key=lambda r: r["speedup_vs_ar"])["speedup_vs_ar"]
    out = [
        {"goal": f"{tabed} block efficiency >= the best single method's on every scenario",
         "measured": f"worst scenario: {worst:.3f} of the best single", "met": worst >= 1.0},
        {"goal": f"{tabed} block efficiency >= 3% above the mean of {' and '.join(singles)}",
         "measured": f"{gain:+.1%}", "met": gain >= 0.03},
        {"goal": f"{tabed} speedup over AR >= 2.5x overall, decode time", "measured": f"{whole['speedup_vs_ar']:.2f}x",
         "met": whole["speedup_vs_ar"] >= 2.5},
        {"goal": f"{tabed} speedup over AR >= 2.0x on every scenario", "measured": f"slowest: {slowest:.2f}x",
         "met": slowest >= 2.0},
    ]
    if "speedup_vs_peer" in whole:
        behind = min(r["speedup_vs_peer"] for r in mine.values())
        out += [{"goal": f"{tabed} walltime >= 1.25x the best transformers peer's speed overall",
                 "measured": f"{whole['speedup_vs_peer']:.2f}x", "met": whole["speedup_vs_peer"] >= 1.25},
                {"goal": f"{tabed} at least as fast as the best peer on every scenario",
                 "measured": f"slowest: {behind:.2f}x", "met": behind >= 1.0}]
    mismatches = sum(r["mismatches"] for s in scenarios.values() for r in s["specs"].values())
    out.append({"goal": "zero greedy mismatches", "measured": str(mismatches), "met": mismatches == 0})
    return out


# ---------------------------------------------------------------- reports


def markdown(report: dict) -> str:
    scenarios, specs = report["scenarios"], report["specs_run"]
    gamma = f"γ adaptive, at most {report['gamma']}" if report.get("adaptive") else f"γ = {report['gamma']}"
    lines = [f"# Benchmark: {report['pair']} on {report['device']} ({report['dtype']})", "",
             f"{gamma} (a spec's own after '@'), max new tokens {report['max_new_tokens']}, temperature "
             f"{report['temperature']}, suite `{report['suite']}`, {report['cases']} cases"
             + ("" if report["complete"] else " (interrupted: partial results)") + ".", "",
             "## Block efficiency (tokens per target forward; best per scenario in bold)", "",
             "| spec | " + " | ".join(scenarios) + " | average |", "|---" * (len(scenarios) + 2) + "|"]
    for spec in specs:
        cells = []
        for scenario in scenarios.values():
            row = scenario["specs"].get(spec)
            value = f"{row['block_efficiency']:.2f}" if row else "–"
            cells.append(f"**{value}**" if spec in scenario["best_block_efficiency"] else value)
        average = report["average"].get(spec, {}).get("block_efficiency", 0.0)
        lines.append(f"| {spec} | " + " | ".join(cells) + f" | {average:.2f} |")
    has_peer = any(is_peer(spec) for spec in specs)
    header = ["scenario", "spec", "speedup vs AR", "walltime speedup", *(["speedup vs peer"] if has_peer else []),
              "acceptance",
              "mismatches", "SD s", "AR s", "draft s", "verify s"]
    lines += ["", "## Speed (seconds summed over the scenario's cases)", "", report["timing"] + ".", "",
              "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, scenario in scenarios.items():
        for spec, row in scenario["specs"].items():
            if not row["cases"]:
                lines.append(f"| {name} | {spec} | failed on every case |" + " |" * (len(header) - 3))
                continue
            peer = [f"{row.get('speedup_vs_peer', 0):.2f}×"] if has_peer else []
            cells = [name, spec, f"{row['speedup_vs_ar']:.2f}×", f"{row['walltime_speedup_vs_ar']:.2f}×", *peer,
                     f"{row['acceptance_rate']:.0%}", str(row["mismatches"]), f"{row['walltime_s']:.2f}",
                     f"{row['ar_walltime_s']:.2f}", f"{row['draft_s']:.2f}", f"{row['verify_s']:.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
    for spec, row in report.get("overall", {}).items():
        if is_peer(spec):
            continue
        peer = [f"{row['speedup_vs_peer']:.2f}×" if "speedup_vs_peer" in row else "–"] if has_peer else []
        cells = ["**all**", f"**{spec}**" if spec == report.get("default_spec") else spec,
                 f"{row['speedup_vs_ar']:.2f}×", f"{row['walltime_speedup_vs_ar']:.2f}×", *peer]
        lines.append("| " + " | ".join(cells) + " |" + " |" * (len(header) - len(cells)))
    failures = [f"{spec} on {name}: failed on {row['failed']} of {row['failed'] + row['cases']} cases ("
                + "; ".join(row["errors"]) + ")"
                for name, scenario in scenarios.items() for spec, row in scenario["specs"].items() if row["failed"]]
    if failures:
        lines += ["", "Failures, left out of the sums:", ""] + [f"- {line}" for line in failures]
    overhead = report.get("overhead", {})
    if overhead:
        lines += ["", "## Overheads", ""]
        if "batched_drafting" in overhead:
            lines.append("One draft step with K batched rows, relative to K = 1: " + ", ".join(
                f"K={k}: {v:.2f}×" for k, v in overhead["batched_drafting"].items()) + ".")
        for spec, share in overhead.get("weights_share", {}).items():
            lines.append(f"Weight computation of {spec}: {share:.2%} of its decode time.")
    if report.get("goals"):
        lines += ["", "## Goals", "", "| goal | measured | met |", "|---|---|---|"]
        lines += [f"| {g['goal']} | {g['measured']} | {'yes' if g['met'] else '**no**'} |" for g in report["goals"]]
    if report.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {note}" for note in report["notes"]]
    return "\n".join(lines) + "\n"


def html(report: dict) -> str:
    import plotly.graph_objects as go

    scenarios = list(report["scenarios"])
    figures = []
    for key, title in (("block_efficiency", "Block efficiency (tokens per target forward)"),
                       ("speedup_vs_ar", "Walltime speedup over the target alone")):
        figure = go.Figure([go.Bar(name=spec, x=scenarios,
                                   y=[report["scenarios"][s]["specs"].get(spec, {}).get(key) for s in scenarios])
                            for spec in report["specs_run"]])
        figure.update_layout(title=title, barmode="group", template="plotly_white", height=420)
        figures.append(figure.to_html(full_html=False, include_plotlyjs=not figures))
    body = "\n".join(figures)
    table = markdown(report).replace("&", "&amp;").replace("<", "&lt;")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>tabed bench: {report['pair']}</title></head>"
            f"<body style='font-family:sans-serif;max-width:1100px;margin:auto'>{body}<pre>{table}</pre></body></html>")


def write_reports(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(markdown(report))
    (out / "report.html").write_text(html(report))


# ---------------------------------------------------------------- the whole benchmark


@dataclass
class BenchSettings:
    suite: Path
    specs: list[str]
    config: GenerationConfig
    out: Path
    peer: bool = False
    limit: int | None = None
    overhead: bool = True
    notes: list[str] = field(default_factory=list)
    repeat: int = 1  # each case's specs run this many times in turn; times are the medians


def check_settings(settings: BenchSettings) -> list[Case]:
    """The cases to run, once every spec and the suite are known to be good: fail before any work
    (loading a pair takes seconds, a 7B one minutes)."""
    for spec in settings.specs:
        bench_spec(spec, settings.config)
    if not 1 <= settings.repeat <= 100:
        raise InputError(f"repeat must be between 1 and 100, got {settings.repeat}")
    return limit_cases(load_suite(settings.suite), settings.limit)


def run_bench(pair: ModelPair, settings: BenchSettings, progress: Callable[[str], None] = lambda line: None) -> dict:
    """Run the suite, writing the reports after every case (an interrupted run keeps what it measured)."""
    cases = check_settings(settings)
    root = settings.suite.parent
    report = {"pair": pair.name, "default_spec": DEFAULT_SPEC, "device": str(pair.device),
              "dtype": str(pair.dtype).removeprefix("torch."),
              "suite": str(settings.suite), "gamma": settings.config.gamma,
              "adaptive": settings.config.adaptive,
              "max_new_tokens": settings.config.max_new_tokens, "temperature": settings.config.temperature,
              "specs_run": settings.specs + (list(PEERS) if settings.peer else []), "cases": 0, "complete": False,
              "notes": list(settings.notes) + ([PEER_NOTE] if settings.peer else []),
              "timing": "each spec right after its own AR run of the same case, after one untimed warm-up case. "
                        "speedup_vs_ar: summed AR decode time / summed SD decode time (the prefill, one target "
                        "forward, is the same on both sides); walltime_speedup_vs_ar and speedup_vs_peer: the "
                        "same with prefill included" + (
                            f"; every case's specs run {settings.repeat} times in turn, each time (SD's and its "
                            "AR run's) the median of its repeats" if settings.repeat > 1 else ""),
              "repeat": settings.repeat}
    warm_up(pair)
    run_case(pair, cases[0], root, settings.specs, settings.config, settings.peer)  # untimed warm-up
    runs: list[Run] = []
    started = time.perf_counter()
    try:
        for index, case in enumerate(cases, 1):
            runs += run_case(pair, case, root, settings.specs, settings.config, settings.peer, settings.repeat)
            report.update(summarize(runs), cases=index, runs=[asdict(r) for r in runs])
            write_reports(report, settings.out)
            mine = {r.spec: r for r in runs[-len(report["specs_run"]):]}
            eta = (time.perf_counter() - started) / index * (len(cases) - index)
            progress(f"{index}/{len(cases)} {case.scenario}/{case.id}: " + ", ".join(
                f"{spec} {pooled([r.emitted], [r.target_forwards]):.2f}" for spec, r in mine.items())
                + f"  eta {eta:.0f} s")
        if settings.overhead:
            report["overhead"] = overheads(pair, cases, root, report)
        report["complete"] = True
    finally:
        report["goals"] = goals(report, report["default_spec"]) if runs else []
        if runs:
            write_reports(report, settings.out)
    return report


def overheads(pair: ModelPair, cases: list[Case], root: Path, report: dict) -> dict:
    """Batched drafting (K rows against 1) on the first pictured case; weights' share of decode time."""
    from .overhead import batching_overhead

    out: dict = {}
    pictured = next((c for c in cases if c.images), None)
    if pictured is not None:
        ratios = batching_overhead(pair, case_turns(pictured, root)[:1])
        out["batched_drafting"] = {str(k): v for k, v in ratios.items() if isinstance(k, int)}
    shares = {}
    for spec in report["specs_run"]:
        rows = [s["specs"][spec] for s in report["scenarios"].values() if spec in s["specs"]]
        if spec.startswith("tabed") and rows:
            shares[spec] = pooled((r["weights_s"] for r in rows), (r["decode_s"] for r in rows))
    out["weights_share"] = shares
    return out


def default_suite() -> Path:
    from .models import ASSETS

    return ASSETS / "bench" / "teaching.jsonl"


def log(line: str) -> None:
    print(f"[bench] {line}", file=sys.stderr, flush=True)
