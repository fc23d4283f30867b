"""The speed model (`engine/speed.py`) checked on the whole suite: per answer, whether the speedup it predicts
from tokens per target pass and the costs of a verify and of drafting is within `TOLERANCE` of the measured
one, and where it is not, why; per scenario and spec, the model of the answers pooled."""

from __future__ import annotations

from ..engine.speed import TIMED_TOKENS, TOLERANCE, SpeedModel, speed_model
from .peers import is_peer
from .suite import Run

SHOWN_MISSES = 12  # the answers the markdown report lists where the model missed (the JSON has every one)


def run_model(run: Run) -> SpeedModel | None:
    """One answer's model; None for a peer, a failed, starved or mismatched run, or one too short to time."""
    if is_peer(run.spec) or run.error or run.busy or run.mismatch or run.new_tokens < TIMED_TOKENS:
        return None
    return speed_model(run.emitted, run.target_forwards - 1, run.drafted, run.accepted, run.draft_s, run.verify_s,
                       run.decode_s, run.ar_decode_s)


def _figures(model: SpeedModel) -> dict:
    return {"tokens_per_pass": model.tokens_per_pass, "verify": model.verify, "drafting": model.drafting,
            "draft_token": model.draft_token, "other": model.other, "predicted": model.predicted,
            "measured": model.measured}


def pooled_model(runs: list[Run]) -> dict | None:
    """The model of a scenario's answers with one spec, their figures summed, and how many answers it held
    within `TOLERANCE` on their own (None when none could be modelled)."""
    modelled = [(run, model) for run in runs if (model := run_model(run)) is not None]
    if not modelled:
        return None
    mine = [run for run, _ in modelled]
    whole = speed_model(sum(run.emitted for run in mine), sum(run.target_forwards - 1 for run in mine),
                        *(sum(getattr(run, name) for run in mine) for name in
                          ("drafted", "accepted", "draft_s", "verify_s", "decode_s", "ar_decode_s")))
    misses = [{"case": run.case, "predicted": model.predicted, "measured": model.measured, "why": model.why_off()}
              for run, model in modelled if model.why_off() is not None]
    return {**_figures(whole), "answers": len(modelled), "within": len(modelled) - len(misses), "misses": misses}


def model_goal(scenarios: dict) -> dict | None:
    """The goal: the predicted speedup within `TOLERANCE` of the measured on at least 90% of the answers."""
    rows = [row["speed_model"] for scenario in scenarios.values() for row in scenario["specs"].values()
            if row.get("speed_model")]
    answers, within = sum(r["answers"] for r in rows), sum(r["within"] for r in rows)
    if not answers:
        return None
    return {"goal": f"the predicted speedup within {TOLERANCE:.0%} of the measured on >= 90% of answers",
            "measured": f"{within} of {answers} ({within / answers:.0%})", "met": within >= 0.9 * answers}


def model_lines(scenarios: dict) -> list[str]:
    """The markdown report's section: the model per scenario and spec, and the answers it missed, with why."""
    lines = ["", "## Why this speed (per target pass, in plain decoding's steps)", "",
             "speedup ≈ tokens per pass / (verify + drafting); 'other' (the weights, bookkeeping) is left out of "
             f"the prediction. An answer is explained when its own prediction is within {TOLERANCE:.0%}.", "",
             "| scenario | spec | tokens per pass | verify | drafting | a drafted token | other | predicted | "
             "measured | answers explained |", "|---|---|---|---|---|---|---|---|---|---|"]
    misses = []
    for name, scenario in scenarios.items():
        for spec, row in scenario["specs"].items():
            model = row.get("speed_model")
            if not model:
                continue
            lines.append(f"| {name} | {spec} | {model['tokens_per_pass']:.2f} | {model['verify']:.2f} | "
                         f"{model['drafting']:.2f} | {model['draft_token']:.3f} | {model['other']:.2f} | "
                         f"{model['predicted']:.2f}× | {model['measured']:.2f}× | "
                         f"{model['within']} of {model['answers']} |")
            misses += [f"- {name}/{miss['case']}, {spec}: predicted {miss['predicted']:.2f}×, measured "
                       f"{miss['measured']:.2f}×: {miss['why']}" for miss in model["misses"]]
    if len(lines) == 6:
        return []
    if misses:
        lines += ["", f"Where the model missed ({len(misses)} answer{'s' * (len(misses) > 1)}):", "",
                  *misses[:SHOWN_MISSES]]
        lines += [f"- … and {len(misses) - SHOWN_MISSES} more (report.json)"] if len(misses) > SHOWN_MISSES else []
    return lines
