"""Golden records: seeded runs on the tiny pairs and the teaching pair record everything they decide (each block's
drafts, kept counts, weights, stop reasons and tests, the metrics but timings, the bench report's counts, the page's
status and stepper in words), compared with the snapshot in `__snapshots__/` by syrupy. Any change fails until it is
accepted on purpose, and the failure shows what changed:

    python -m pytest tests/test_golden.py -n 0 --snapshot-update    # accept the change; review its diff in git

Timings come from a clock that ticks 2⁻¹⁰ s at each reading (exact in binary, so no figure depends on where the
count started) and every run gets its whole CPU share, so the page's speed sentences are recorded too. Numbers
are kept to three decimals: a fourth can differ between CPUs."""

import html
import itertools
import json
import re
import threading
from dataclasses import asdict

import pytest

from conftest import conversations, serving, status_text
from tabed.bench.runner import BenchSettings, run_bench
from tabed.engine.config import GenerationConfig
from tabed.engine.events import BlockEvent, GenerationResult, Position, WeightUpdate
from tabed.engine.loop import collect, speculative_generate
from tabed.engine.session import Clock
from tabed.engine.spec import parse_spec
from tabed.models.chat import Turn
from tabed.page.controls import MODES

TICK = 2.0 ** -10
TIMINGS = {"prefill_s", "decode_s", "walltime_s", "tokens_per_s", "draft_s", "verify_s", "weights_s", "caption_s",
           "speedup", "cpu_share", "busy"}


@pytest.fixture
def ticking_clock(monkeypatch):
    ticks, lock = itertools.count(), threading.Lock()

    def now(self):
        with lock:
            return next(ticks) * TICK

    monkeypatch.setattr(Clock, "now", now)
    monkeypatch.setattr(Clock, "cpu_share", lambda self: 1.0)


def rounded(value):
    """Floats to three decimals, inside lists and dicts too."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(item) for item in value]
    return value


def tokens_of(top: list[list]) -> list[int]:
    """A distribution's three likeliest tokens."""
    return [token for token, _ in top[:3]]


def present(record: dict) -> dict:
    """A typed record's fields that hold something (the records keep what the run decided, not empty slots)."""
    return {key: [present(v) if isinstance(v, dict) else v for v in value] if isinstance(value, list) else value
            for key, value in record.items() if value is not None}


def position_record(position: Position) -> dict:
    """What a verified position decided: each distribution's top tokens, and the test the draft met."""
    test = present(asdict(position.test))
    if "residual" in test:
        test["residual_top"] = tokens_of(test.pop("residual"))
    return {"draft": position.draft, "methods": {m: tokens_of(top) for m, top in position.methods.items()},
            "ensemble": tokens_of(position.ensemble), "target": tokens_of(position.target), "test": test}


def weight_record(update: WeightUpdate | None) -> dict | None:
    """How a block's weights were chosen: the rule, the history's size, and what decided (w-grid: each
    candidate's matches, the most matched and the winner)."""
    if update is None:
        return None
    kept = {key: value for key, value in present(asdict(update)).items()
            if key in ("rule", "positions", "most_matches", "winner", "weights", "shared", "waiting")
            and not (key == "waiting" and value == 0)}
    if update.candidates is not None:
        kept["matches"] = [candidate.matches for candidate in update.candidates]
    return kept


def block_record(block: BlockEvent) -> dict:
    return {"weights": block.weights, "draft": block.draft, "drafts": block.drafts, "accepted": block.accepted,
            "target_token": block.target_token, "target_token_prob": block.target_token_prob, "bonus": block.bonus,
            "emitted": block.emitted, "method_accepted": block.method_accepted, "stop": str(block.stop),
            "resting": block.resting,
            "tree": [[node.token, node.parent, node.proposer, node.accepted] for node in block.tree],
            "positions": [position_record(p) for p in block.positions],
            "weight_update": weight_record(block.weight_update)}


def run_record(result: GenerationResult) -> dict:
    metrics = {key: value for key, value in asdict(result.metrics).items() if key not in TIMINGS}
    return rounded({"spec": result.spec, "tokens": result.token_ids, "text": result.text, "notes": result.notes,
                    "shared": result.shared, "stopped": result.stopped, "metrics": metrics,
                    "blocks": [block_record(b) for b in result.blocks]})


def as_lines(record: dict) -> str:
    """A record as text, a line a field and a line a block, so that a change's diff names the block it changed."""
    out = []
    for key, value in record.items():
        if key == "blocks":
            out += [f"block {i}: {json.dumps(block, sort_keys=True)}" for i, block in enumerate(value)]
        else:
            out.append(f"{key}: {json.dumps(value, sort_keys=True, ensure_ascii=False)}")
    return "\n".join(out)


def words(page: str) -> str:
    """A page's HTML as the words it shows, numbers to three decimals."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    text = re.sub(r"(\d+\.\d{3})\d+", r"\1", text)
    return re.sub(r"[ \t]+", " ", re.sub(r"\s*\n\s*", "\n", text)).strip()


ENGINE_RUNS = {  # name: (spec, conversation kind, settings)
    "greedy-chain": ("tabed-MT", "image-first-turn", {}),
    "sampling-chain": ("tabed-MT", "image-first-turn", {"temperature": 1.0, "seed": 3}),
    "greedy-tree": ("tabed-MT", "image-first-turn", {"tree_width": 2}),
    "sampling-tree": ("tabed-MT", "image-first-turn", {"tree_width": 2, "temperature": 1.0, "seed": 3}),
    "greedy-members": ("tabed-MT", "image-first-turn", {"tree_width": 2, "tree_policy": "members"}),
    "sampling-members": ("tabed-MT", "image-first-turn", {"tree_width": 2, "tree_policy": "members",
                                                          "temperature": 1.0, "seed": 3}),
    "m-alone": ("M", "image-first-turn", {}),
    "t-alone": ("T", "image-first-turn", {}),
    "static-mt": ("MT", "image-first-turn", {"adaptive": False, "gamma": 4}),
    "n-on": ("tabed-MTN", "repeats", {}),
    "follow-up": ("tabed-MT", "image-second-turn", {}),
    "no-picture": ("tabed-MT", "text-first-turn", {}),
}


@pytest.mark.parametrize("name", ENGINE_RUNS)
def test_a_seeded_engine_runs_record(pair, image, name, snapshot):
    spec, kind, settings = ENGINE_RUNS[name]
    turns = conversations(image) | {"repeats": [Turn("w1 w2 w1 w2 w3", [image], answer="w4 w5 w4 w5"), Turn("w4 w5")]}
    config = GenerationConfig(max_new_tokens=32, inspect=True, **settings)
    assert as_lines(run_record(collect(speculative_generate(pair, turns[kind], parse_spec(spec), config)))) == snapshot


def page_record(app, outputs) -> dict:
    """What the page showed when a run ended: its status, how its answer's tokens are coloured, its metrics' and
    block table's rows and every block in the stepper."""
    from tabed.page.view import Frame

    out = Frame(*outputs[-1])
    def table(frame) -> str:
        return "\n".join(" | ".join(words(str(cell)) for cell in row) for row in frame.value["data"])

    steps = [f"block {index}:\n{words(app.show_step(out.state, index)[1])}"
             for index in range(len(out.state.last.blocks))]
    colours = " ".join(re.findall(r'class="tk tk-(\w+)"', out.tabed))  # each token of the answer as coloured
    return "\n\n".join([f"status:\n{status_text(out.status)}", f"answer's colours:\n{colours}",
                        f"metrics:\n{table(out.metrics)}", f"block table:\n{table(out.blocks)}", *steps])


SETTINGS = dict(preset="teaching", methods=["M", "T"], mode="TABED (adaptive weights)", rule="w-grid", window=0,
                gamma=5, max_new_tokens=24, temperature=0.0, seed=0, compare_ar=True, adaptive=True, tree_width=1,
                tree_policy="ensemble", tree_blocks="all", hedge_first=True)


def test_the_tiny_pairs_page_records(pair, image, tmp_path, ticking_clock, snapshot):
    """A run, a sampled run with each method alone, and a follow-up, as the page words them."""
    import app
    from tabed.page.view import Frame

    path = tmp_path / "picture.png"
    image.save(path)
    assert SETTINGS["mode"] == MODES[0]
    with serving(pair):
        first = list(app.run(str(path), "w1 w2 w3", None, **SETTINGS))
        state = Frame(*first[-1]).state
        follow = list(app.ask_follow_up(None, "w4 w5", state, **SETTINGS))
        sampled = list(app.run(str(path), "w1 w2", None, **SETTINGS | {"temperature": 1.0, "seed": 4,
                                                                       "methods_alone": True}))
        record = {"run": page_record(app, first), "follow-up": page_record(app, follow),
                  "sampled-with-methods-alone": page_record(app, sampled)}
    assert record == snapshot


@pytest.mark.slow
def test_the_teaching_pairs_bundled_example_records(teaching_pair, ticking_clock, snapshot):
    """The bundled example the page opens with, on the page's defaults: what the engine decided, and the page's
    words."""
    import app
    from tabed.models.presets import ASSETS
    from tabed.page.view import Frame

    with serving(teaching_pair):
        outputs = list(app.run(str(ASSETS / "examples" / "shapes.png"), "Describe the image in detail.", None))
        blocks = Frame(*outputs[-1]).state.last.blocks
        assert page_record(app, outputs) == snapshot(name="page")
        assert as_lines({"blocks": [rounded(block_record(b)) for b in blocks]}) == snapshot(name="blocks")


def test_a_seeded_bench_reports_counts(pair, image, tmp_path, ticking_clock, snapshot):
    """The bench's report on a two-case suite: per scenario and spec, the counts that do not depend on time, and
    its block-efficiency table."""
    image.save(tmp_path / "red.png")
    cases = [{"id": "one", "scenario": "image", "images": ["red.png"], "turns": ["w1 w2"]},
             {"id": "two", "scenario": "followup", "images": ["red.png"],
              "turns": [{"prompt": "w3", "answer": "w4 w5"}, {"prompt": "w6 w7"}]}]
    (tmp_path / "suite.jsonl").write_text("\n".join(json.dumps(case) for case in cases) + "\n")
    settings = BenchSettings(tmp_path / "suite.jsonl", ["M", "T", "tabed-MT", "tabed-MT+tree2:members"],
                             GenerationConfig(max_new_tokens=12),
                             tmp_path / "out", overhead=False)
    report = run_bench(pair, settings)
    counted = ("block_efficiency", "acceptance_rate", "mismatches", "cases", "failed", "new_tokens", "mean_accepted",
               "accepted_histogram", "target_forwards", "nodes_per_block")
    record = {name: {spec: {key: row[key] for key in counted if key in row} for spec, row in scenario["specs"].items()}
              for name, scenario in report["scenarios"].items()}
    table = (tmp_path / "out" / "report.md").read_text().split("## Block efficiency")[1].split("## Speed")[0]
    assert as_lines(rounded(record)) + "\n" + table == snapshot
