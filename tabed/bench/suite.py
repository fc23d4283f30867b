"""Benchmark suites: JSONL files of cases (a conversation whose last turn is decoded and timed), and
the record of one case decoded by one spec."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..models.chat import Turn, load_image
from ..models.presets import ASSETS
from .divergence import Divergence


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


def in_turn(cases: list[Case]) -> list[Case]:
    """The cases taken from each scenario in turn (its first case, the next scenario's first, ...), each
    scenario's in suite order, so that a run cut short has measured every scenario alike."""
    by_scenario: dict[str, list[Case]] = {}
    for case in cases:
        by_scenario.setdefault(case.scenario, []).append(case)
    rounds = itertools.zip_longest(*by_scenario.values())
    return [case for round_ in rounds for case in round_ if case is not None]


def case_turns(case: Case, root: Path) -> list[Turn]:
    images = [load_image(root / image) for image in case.images]
    return [Turn(t["prompt"], images if i == 0 else [], t.get("answer")) for i, t in enumerate(case.turns)]


def default_suite() -> Path:
    return ASSETS / "bench" / "teaching.jsonl"


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
    divergence: Divergence | None = None  # where a mismatched answer left plain decoding's, and how close
    error: str = ""  # a peer that refused the case says why; its run is left out of the sums
    busy: bool = False  # either side got too little of the CPU to be timed (`Metrics.busy`)
    accepted_histogram: list[int] = field(default_factory=list)  # blocks by the drafts they kept
    position_drafted: list[int] = field(default_factory=list)  # per draft position: blocks that drafted it
    position_kept: list[int] = field(default_factory=list)  # per draft position: blocks that kept it
    blocks: int = 0
    nodes: int = 0  # what the blocks drafted for the target to check: a chain's drafts, a tree's nodes
