"""The bench's statistics and reports: per scenario and spec, pooled over cases, and the goals."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from pathlib import Path

from ..engine.acceptance import Acceptance, PositionCounts
from ..engine.spec import DEFAULT_SPEC
from .explained import model_goal, model_lines, pooled_model
from .machine import machine_line
from .peers import is_peer
from .suite import Run


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


def _summed(rows: list[list[int]]) -> list[int]:
    """Lists of counts added position by position (a shorter one counts 0 where it has none)."""
    out = [0] * max((len(row) for row in rows), default=0)
    for row in rows:
        for index, count in enumerate(row):
            out[index] += count
    return out


def _acceptance(runs: list[Run]) -> dict:
    """The runs' blocks by drafts kept (`accepted_histogram`), each draft position's share kept of the
    blocks that drafted that far (`acceptance_by_position`), and the mean drafts kept a block."""
    drafted, kept = _summed([r.position_drafted for r in runs]), _summed([r.position_kept for r in runs])
    summary = Acceptance(_summed([r.accepted_histogram for r in runs]),
                         [PositionCounts(d, k) for d, k in zip(drafted, kept, strict=True)]).summary()
    return {key: summary[key] for key in ("accepted_histogram", "acceptance_by_position", "mean_accepted")}


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
                "nodes_per_block": pooled((r.nodes for r in mine), (r.blocks for r in mine)),
                "mismatches": sum(r.mismatch for r in mine),
                "busy": sum(r.busy for r in mine),
                **_acceptance(mine),
                **{name: sum(getattr(r, name) for r in mine) for name in SUMMED},
                "speed_model": pooled_model(mine),
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
    """The project's goals for the default spec `tabed` (issue 56: never behind its own members), each with
    its measured value, where the specs run allow (against M and T when both ran, against the peers when
    they did). Speeds against a single method compare the two specs' summed times in this one run: their
    plain runs do not enter, so their noise does not either."""
    scenarios = summary["scenarios"]
    explained = [goal] if (goal := model_goal(scenarios)) else []  # whatever the specs: the speed model's
    if not scenarios or any(tabed not in s["specs"] for s in scenarios.values()):
        return explained
    out = []
    if all(m in s["specs"] for s in scenarios.values() for m in singles):
        out += _token_goals(summary, tabed, singles) + _speed_goals(summary, tabed, singles)
    out += _slowest_answer_goal(summary, tabed) + _peer_goals(summary, tabed) + explained
    mismatches = sum(r["mismatches"] for s in scenarios.values() for r in s["specs"].values())
    gaps = [abs(d["gap"]) for d in _divergences(summary) if d["gap"] is not None]
    widest = f" (the widest gap {max(gaps):.4f} logits)" if gaps else ""
    out.append({"goal": "zero greedy mismatches", "measured": f"{mismatches}{widest}", "met": mismatches == 0})
    return out


def _token_goals(summary: dict, tabed: str, singles: tuple[str, ...]) -> list[dict]:
    """Tokens a target pass: the paper's robustness, per scenario, and its gain on average."""
    scenarios, average = summary["scenarios"], summary["average"]
    worst = min(s["specs"][tabed]["block_efficiency"] / max(s["specs"][m]["block_efficiency"] for m in singles)
                for s in scenarios.values())
    base = mean(average[m]["block_efficiency"] for m in singles)
    gain = average[tabed]["block_efficiency"] / base - 1 if base else 0.0
    return [{"goal": f"{tabed} block efficiency >= the best single method's on every scenario",
             "measured": f"worst scenario: {worst:.3f} of the best single", "met": worst >= 1.0},
            {"goal": f"{tabed} block efficiency >= 3% above the mean of {' and '.join(singles)}",
             "measured": f"{gain:+.1%}", "met": gain >= 0.03}]


def _speed_goals(summary: dict, tabed: str, singles: tuple[str, ...]) -> list[dict]:
    """Time: at least as fast as each single method overall, and never far behind the faster one in a
    scenario."""
    scenarios = summary["scenarios"]

    def faster(key: str, spec: str) -> float:  # tabed against `spec` over every scenario, in `key` seconds
        rows = [s["specs"] for s in scenarios.values()]
        return pooled((r[spec][key] for r in rows), (r[tabed][key] for r in rows))

    overall = {m: (faster("decode_s", m), faster("walltime_s", m)) for m in singles}
    behind = {name: min(s["specs"][m]["decode_s"] for m in singles) / s["specs"][tabed]["decode_s"]
              for name, s in scenarios.items() if s["specs"][tabed]["decode_s"]}
    worst = min(behind, key=behind.get) if behind else None
    out = [{"goal": f"{tabed} at least as fast as {' and as '.join(singles)} alone overall, decode time and walltime",
            "measured": ", ".join(f"{m} {d:.2f}x ({w:.2f}x)" for m, (d, w) in overall.items()),
            "met": all(min(pair) >= 1.0 for pair in overall.values())}]
    if worst is not None:
        out.append({"goal": f"{tabed} >= 0.95x the faster single method on every scenario, decode time",
                    "measured": f"slowest: {worst} {behind[worst]:.2f}x", "met": behind[worst] >= 0.95})
    return out


def _slowest_answer_goal(summary: dict, tabed: str) -> list[dict]:
    """No answer of `tabed` slower than its plain run by more than noise (from the report's runs)."""
    answers = [r for r in summary.get("runs", []) if r["spec"] == tabed and not r["error"] and r["decode_s"]]
    if not answers:
        return []
    speed, case = min(((r["ar_decode_s"] / r["decode_s"], r["case"]) for r in answers), key=lambda pair: pair[0])
    return [{"goal": f"no {tabed} answer slower than 0.95x plain decoding, decode time",
             "measured": f"slowest: {case} {speed:.2f}x", "met": speed >= 0.95}]


def _peer_goals(summary: dict, tabed: str) -> list[dict]:
    """Against the fastest transformers peer, in walltime (its prefill cannot be told from its decoding)."""
    whole = summary["overall"][tabed]
    if "speedup_vs_peer" not in whole:
        return []
    behind = min(s["specs"][tabed]["speedup_vs_peer"] for s in summary["scenarios"].values())
    return [{"goal": f"{tabed} walltime >= 1.2x the best transformers peer's speed overall",
             "measured": f"{whole['speedup_vs_peer']:.2f}x", "met": whole["speedup_vs_peer"] >= 1.2},
            {"goal": f"{tabed} at least as fast as the best peer on every scenario",
             "measured": f"slowest: {behind:.2f}x", "met": behind >= 1.0}]


MISMATCH_NOTE = ("Where a greedy answer left plain decoding's, the target's own logits for the two tokens, "
                 "from one forward over the prompt and the tokens both share: a few thousandths of a logit is "
                 "half precision rounding a many-token verify and a one-token step differently at a near-tie; "
                 "a logit or more is a bug")


def _divergences(report: dict) -> list[dict]:
    return [run["divergence"] for run in report.get("runs", ()) if run.get("mismatch") and run.get("divergence")]


def _describe(divergence: dict | None) -> str:
    if not divergence:
        return "differs from plain decoding"
    plain, other = (repr(divergence[side]) if divergence[side] else "the end" for side in ("plain", "other"))
    gap = "" if divergence["gap"] is None else f"; the target's logits {abs(divergence['gap']):.4f} apart"
    return f"token {divergence['index']}: plain decoding {plain}, this run {other}{gap}"


def markdown(report: dict) -> str:
    scenarios, specs = report["scenarios"], report["specs_run"]
    gamma = f"γ adaptive, at most {report['gamma']}" if report.get("adaptive") else f"γ = {report['gamma']}"
    lines = [f"# Benchmark: {report['pair']} on {report['device']} ({report['dtype']})", "",
             *([f"Measured on {machine_line(report['machine'])}.", ""] if report.get("machine") else []),
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
    lines += _acceptance_lines(scenarios)
    lines += model_lines(scenarios)
    failures = [f"{spec} on {name}: failed on {row['failed']} of {row['failed'] + row['cases']} cases ("
                + "; ".join(row["errors"]) + ")"
                for name, scenario in scenarios.items() for spec, row in scenario["specs"].items() if row["failed"]]
    if failures:
        lines += ["", "Failures, left out of the sums:", ""] + [f"- {line}" for line in failures]
    busy = sum(row.get("busy", 0) for scenario in scenarios.values() for row in scenario["specs"].values())
    if busy:
        lines += ["", f"**Timings unreliable**: {busy} runs got too little of the CPU (the machine was busy); "
                      "run again when it is idle."]
    if any(run.get("mismatch") for run in report.get("runs", ())):
        lines += ["", "## Mismatches", "", MISMATCH_NOTE, ""] + [
            f"- {run['case']}, {run['spec']}: {_describe(run.get('divergence'))}"
            for run in report["runs"] if run.get("mismatch")]
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


ACCEPTANCE_POSITIONS = 8  # the draft positions the markdown report shows (the JSON has every one)


def _acceptance_lines(scenarios: dict) -> list[str]:
    """Per scenario and spec: the mean drafts kept a block, the blocks by drafts kept, and each draft
    position's share kept (of the blocks that drafted that far, in brackets)."""
    lines = ["", "## Acceptance (per block; a draft is kept only with every draft before it)", "",
             "| scenario | spec | drafted a block (a tree's nodes) | drafts kept a block | blocks by drafts kept "
             f"(0, 1, 2, …) | kept at draft position 1, 2, … {ACCEPTANCE_POSITIONS} (blocks that drafted that far) |",
             "|---|---|---|---|---|---|"]
    for name, scenario in scenarios.items():
        for spec, row in scenario["specs"].items():
            if not row.get("accepted_histogram"):
                continue
            positions = " · ".join(f"{cell['rate']:.0%} ({cell['blocks']})"
                                   for cell in row["acceptance_by_position"][:ACCEPTANCE_POSITIONS])
            histogram = ", ".join(str(count) for count in row["accepted_histogram"])
            lines.append(f"| {name} | {spec} | {row['nodes_per_block']:.2f} | {row['mean_accepted']:.2f} | {histogram} "
                         f"| {positions} |")
    return lines if len(lines) > 5 else []


def html(report: dict) -> str:
    import plotly.graph_objects as go

    scenarios = list(report["scenarios"])
    figures = []
    for key, title in (("block_efficiency", "Block efficiency (tokens per target forward)"),
                       ("speedup_vs_ar", "Speedup over the target alone (decode time)")):
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
