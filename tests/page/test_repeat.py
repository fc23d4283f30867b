"""A request run several times (`repeat`): TABED and plain decoding in turn, the median run's figures shown with
the range of all, a greedy answer that changes between runs said to be a bug; a run on a busy machine gives no
figure. The runs' decode times are set by hand here (one list per side), and so are the machine's quiet costs,
so that every figure is known; the tokens are the tiny pair's own."""

import json
import time
from pathlib import Path

import pytest

import app
from conftest import serving, status_text
from tabed.engine.events import Finished
from tabed.engine.speed import StepCosts
from tabed.page import render, worker
from tabed.page.controls import MODES
from tabed.page.pairs import QuietMeter
from tabed.page.request import Request
from tabed.page.view import BUSY_RACE, Frame
from tabed.page.worker import AUTOREGRESSIVE, SPECULATIVE

SETTINGS = dict(preset="teaching", methods=["M", "T"], mode=MODES[0], rule="w-grid", window=0, gamma=5,
                max_new_tokens=24, temperature=0.0, seed=0, compare_ar=True, adaptive=True, tree_width=1,
                tree_policy="ensemble", tree_blocks="all", hedge_first=True)


@pytest.fixture
def tiny_app(pair):
    with serving(pair) as served:
        yield served


FRAMES = [0]  # frames the page has made in this test so far (`ask` counts them)


@pytest.fixture
def timed(monkeypatch):
    """Each side's runs with the decode times of `times[side]` in turn (a quiet machine's), each held until the
    page has made two frames more (the second one's status shows it, however busy the machine), and every run's
    result kept in `runs[side]`; `change(side, run, how)` alters that run's result before the page sees it."""
    times = {SPECULATIVE: [], AUTOREGRESSIVE: []}
    runs = {SPECULATIVE: [], AUTOREGRESSIVE: []}
    changes = {}  # (side, run) -> how its result changes; ("stop", side, run): Stop pressed as it ends

    def shown_twice_more() -> None:
        seen, waited = FRAMES[0], time.monotonic()
        while FRAMES[0] < seen + 2 and time.monotonic() - waited < 30:
            time.sleep(0.01)

    def timing(side, generate):
        def wrapped(*args, **kwargs):
            for index, event in enumerate(generate(*args, **kwargs)):
                if index == 1:  # the run has begun (its first event is on its way to the page)
                    shown_twice_more()
                if isinstance(event, Finished):
                    run = len(runs[side])
                    metrics = event.result.metrics
                    metrics.decode_s, metrics.busy = times[side][run % len(times[side])], False
                    changes.get((side, run), lambda result: None)(event.result)
                    runs[side].append(event.result)
                    if ("stop", side, run) in changes:
                        kwargs["cancel"].set()
                yield event
        return wrapped

    monkeypatch.setattr(worker, "speculative_generate", timing(SPECULATIVE, worker.speculative_generate))
    monkeypatch.setattr(worker, "autoregressive_generate", timing(AUTOREGRESSIVE, worker.autoregressive_generate))
    yield times, runs, lambda side, run, how: changes.__setitem__((side, run) if how != "stop" else (how, side, run),
                                                                  how)


def ask(tiny_app, image_path=None, **changes) -> list[Frame]:
    frames = []
    for values in tiny_app.run(image_path, "w1 w2 w3", None, **{**SETTINGS, **changes}):
        FRAMES[0] += 1
        out = Frame(*values)
        out.status = status_text(out.status)
        frames.append(out)
    return frames


def rows(frame: Frame) -> dict[str, list]:
    return {row[0]: row[1:] for row in frame.metrics.value["data"]}


def test_three_runs_headline_the_median_run_and_the_range(tiny_app, timed):
    """TABED and plain decoding in turn, three times each; TABED's decode times 0.5, 1.0, 2.0 s against plain
    decoding's 1.5 s: speedups 3.00, 1.50 and 0.75. The verdict, the metrics, the reasons, the download and the
    race are the median run's (the second); the range names all three; every repeat is said while it runs."""
    times, runs, _ = timed
    times[SPECULATIVE][:] = [0.5, 1.0, 2.0]
    times[AUTOREGRESSIVE][:] = [1.5]
    frames = ask(tiny_app, repeat=3)
    out = frames[-1]
    assert len(runs[SPECULATIVE]) == len(runs[AUTOREGRESSIVE]) == 3
    verdict = out.status.splitlines()[0]
    assert verdict.startswith("\u2713 TABED ran 1.50× as fast as plain decoding (the median of 3 runs, 0.75–3.00×); "
                              "its answer is identical")
    table = rows(out)
    assert out.metrics.value["data"][1][0] == "speedup over 3 runs of each side (the median run's above)"
    assert table["speedup (decode time)"][0] == "1.50×" and table["decode time (s)"] == ["1.000", "1.500"]
    assert table["speedup over 3 runs of each side (the median run's above)"][0] == "0.75× to 3.00×"
    assert "It is the median of 3 runs of each side, taken in turn (3.00×, 1.50×, 0.75×)" in out.status
    said = [frame.status for frame in frames]
    assert any("(run 1 of 3)" in s for s in said)
    for run in (2, 3):
        for side in ("TABED", "plain decoding"):
            assert any(f"timing run {run} of 3: {side}…" in s for s in said), (run, side)
    state = out.state
    median = runs[SPECULATIVE][1]
    assert state.last.blocks is median.blocks  # the stepper's blocks are the median run's
    assert state.last.frames[SPECULATIVE] == render.result_texts(tiny_app.PAIRS.pair.tokenizer, median)  # the race
    record = json.loads(next(Path(state.export_dir).glob("*.json")).read_text())
    assert record["speedup"] == pytest.approx(1.5)
    assert record["results"][SPECULATIVE]["metrics"]["decode_s"] == 1.0
    assert record["repeats"] == {"asked": 3, "finished": 3, "speedups": pytest.approx([3.0, 1.5, 0.75]),
                                 "runs": [1, 2, 3], "median_run": 2, "differing": []}
    drafted = [round(block.draft_s * 1e3, 1) for block in median.blocks]  # the block table's: the median run's
    assert [row[-2] for row in out.blocks.value["data"]] == drafted
    assert drafted != [round(block.draft_s * 1e3, 1) for block in runs[SPECULATIVE][0].blocks]


def test_a_stop_during_the_repeats_keeps_the_runs_that_finished_and_says_so(tiny_app, timed):
    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5, 1.0, 2.0], [1.5]
    change(AUTOREGRESSIVE, 1, "stop")  # as run 2's plain decoding ends: run 3 never starts
    out = ask(tiny_app, repeat=3)[-1]
    assert len(runs[SPECULATIVE]) == 2
    lines = out.status.splitlines()
    assert "(the median of 2 runs, 1.50–3.00×)" in lines[0]
    assert lines[1] == "- \u25a0 Stopped: after 2 runs of 3: the figures are theirs."
    record = json.loads(next(Path(out.state.export_dir).glob("*.json")).read_text())["repeats"]
    assert (record["asked"], record["finished"]) == (3, 2)
    change(SPECULATIVE, 2, "stop")  # as the next request's run 1 ends: plain decoding never starts
    out = ask(tiny_app, repeat=3)[-1]
    assert out.status.startswith("\u25a0 Stopped before plain decoding began")


def test_one_quiet_run_among_starved_ones_is_the_figure(tiny_app, timed):
    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5, 1.0, 2.0], [1.5]
    for run in (0, 1):
        change(SPECULATIVE, run, lambda result: setattr(result.metrics, "busy", True))
    out = ask(tiny_app, repeat=3)[-1]
    assert out.status.startswith("\u2713 TABED ran slower than plain decoding (0.75×); ")  # run 3's, no range


def test_methods_alone_after_the_repeats_are_not_said_to_be_a_run_of_them(tiny_app, timed):
    times, runs, _ = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5], [1.5]
    said = [frame.status for frame in ask(tiny_app, repeat=2, methods_alone=True)]
    alone = [s for s in said if "alone, for comparison" in s]
    assert alone and not any("run 1 of" in s or "timing run" in s for s in alone)
    assert len(runs[SPECULATIVE]) == 2 + 2  # two runs of TABED, then M and T alone


def test_one_run_says_no_range_and_a_repeat_needs_plain_decoding(tiny_app, timed):
    """repeat 1 (the default) is today's page: no range anywhere. Without plain decoding there is no speed to
    repeat for: TABED runs once."""
    times, runs, _ = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5], [1.5]
    out = ask(tiny_app, repeat=1)[-1]
    assert out.status.splitlines()[0].startswith("\u2713 TABED ran 3.00× as fast as plain decoding; ")
    assert "runs" not in out.status.splitlines()[0] and not any("over" in key for key in rows(out))
    said = [frame.status for frame in ask(tiny_app, repeat=5, compare_ar=False)]
    assert len(runs[SPECULATIVE]) == 2 and len(runs[AUTOREGRESSIVE]) == 1
    assert not any("run 1 of" in s for s in said if isinstance(s, str))  # no run of five is said


def test_nine_runs_the_most(tiny_app, timed):
    times, runs, _ = timed
    times[SPECULATIVE][:] = [0.5, 1.0, 2.0, 0.6, 0.7, 0.8, 0.9, 1.1, 1.2]
    times[AUTOREGRESSIVE][:] = [1.5]
    out = ask(tiny_app, repeat=9, max_new_tokens=12)[-1]
    assert len(runs[SPECULATIVE]) == len(runs[AUTOREGRESSIVE]) == 9
    assert "(the median of 9 runs, 0.75–3.00×)" in out.status.splitlines()[0]
    assert rows(out)["decode time (s)"][0] == "0.900"  # the fifth of nine


@pytest.mark.parametrize("repeat", [0, 10, 2.5, "3", True, None])
def test_a_repeat_out_of_bounds_is_refused_naming_it(tiny_app, timed, repeat):
    out = ask(tiny_app, repeat=repeat)[-1]
    assert out.status == f"\u26a0\ufe0f Error: repeat must be a whole number from 1 to 9 (runs of each side, the " \
                         f"median shown); got {repeat!r}"
    assert not timed[1][SPECULATIVE]


def test_a_greedy_answer_that_changes_between_runs_is_said_to_be_a_bug(tiny_app, timed):
    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5, 1.0, 2.0], [1.5]
    change(AUTOREGRESSIVE, 2, lambda result: result.token_ids.append(result.token_ids[-1]))
    out = ask(tiny_app, repeat=3)[-1]
    assert "- \u26a0\ufe0f Runs differ: run 3 answered differently from run 1: a bug, please report it." in out.status
    assert json.loads(next(Path(out.state.export_dir).glob("*.json")).read_text())["repeats"]["differing"] == [3]
    out = ask(tiny_app, repeat=3)[-1]
    assert "Runs differ" not in out.status


def test_a_run_the_machine_starved_is_left_out_of_the_median(tiny_app, timed):
    """A repeat that got too little CPU measures the machine's other work: the median and range are the other
    runs'; when every run was starved, the verdict gives no figure."""
    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5, 1.0, 2.0], [1.5]
    change(SPECULATIVE, 0, lambda result: setattr(result.metrics, "busy", True))
    out = ask(tiny_app, repeat=3)[-1]
    assert "ran slower than plain decoding (0.75×; the median of 2 runs, 0.75–1.50×)" in out.status.splitlines()[0]
    change(SPECULATIVE, 4, lambda result: setattr(result.metrics, "busy", True))
    for run in (3, 5):
        change(SPECULATIVE, run, lambda result: setattr(result.metrics, "busy", True))
    out = ask(tiny_app, repeat=3)[-1]
    assert out.status.startswith("\u2713 TABED's timings are unreliable (the machine was busy): no speedup")


def test_the_zerogpu_budget_counts_every_repeat():
    """Both sides each repeat, each method alone once; without plain decoding, one run whatever the repeat."""
    assert app._gpu_seconds(False, Request(methods=["M", "T"], max_new_tokens=100, repeat=3)) == 30 + 0.25 * 6 * 100
    assert app._gpu_seconds(False, Request(methods=["M", "T"], max_new_tokens=100, repeat=3,
                                           methods_alone=True)) == 30 + 0.25 * 8 * 100
    assert app._gpu_seconds(False, Request(max_new_tokens=100, repeat=99)) == 30 + 0.25 * 2 * 100  # refused: once
    assert app._gpu_seconds(False, Request(max_new_tokens=100, repeat=3, compare_ar=False)) == 30 + 0.25 * 1 * 100


@pytest.fixture
def quiet(tiny_app):
    """The machine's quiet costs as the page's probe finds them, set by hand: `costs[0]` (None: the probe found
    the machine busy); `probes` counts the probes taken."""
    costs, probes = [None], []
    tiny_app.PAIRS.quiet = QuietMeter(probe=lambda pair: probes.append(pair) or costs[0])
    return costs, probes


def steps_of(seconds: float):
    """A change to a plain run: each of its steps took `seconds`."""
    return lambda result: [setattr(token, "step_s", seconds) for token in result.tokens]


def test_a_run_far_off_the_quiet_costs_gives_no_figure_and_names_the_machine(tiny_app, timed, quiet):
    """Plain decoding's steps at 65.2 ms against a quiet step of 10 ms: the machine was 6.5× slower than when
    quiet. No speedup in the verdict, the metrics mark theirs, the reason puts the two costs side by side and
    blames neither the drafts nor anything but the machine, and the race is refused."""
    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5], [1.5]
    change(AUTOREGRESSIVE, 0, steps_of(0.0652))
    costs, probes = quiet
    costs[0] = StepCosts(step_s=0.010, verify_s=100.0, tokens=6)  # the verifies' own costs are nowhere near
    out = ask(tiny_app)[-1]
    plain = runs[AUTOREGRESSIVE][0]
    assert len(probes) == 1 and plain.metrics.new_tokens == 24
    lines = out.status.splitlines()
    assert lines[0].startswith("\u2713 TABED's timings are unreliable (the machine was busy): no speedup; its "
                               "answer is identical")
    assert lines[1] == ("- \u26a0\ufe0f Timings unreliable: this machine was slower this time: the big model took "
                        "6.5× as long as quiet.")
    assert ("Plain decoding's steps took 65.2 ms (the median), where this machine takes 10.0 ms when it is quiet "
            "(measured before a run found it idle), and this run's checks took 0.0× what the same checks take "
            "quiet.") in out.status
    assert "Its clock read 3.00×" in out.status
    assert "Each check still produced" in out.status and "drafts missed" not in out.status
    assert not any(line.startswith("- Why") for line in lines)  # nothing explains a busy machine's figure
    assert rows(out)["speedup (decode time)"][0] == "3.00× (busy)"
    assert out.state.last.frames == {} and out.state.last.race_note == BUSY_RACE
    assert BUSY_RACE in "".join(tiny_app.replay_race(out.state))
    record = json.loads(next(Path(out.state.export_dir).glob("*.json")).read_text())
    assert record["costs"]["far"] and record["costs"]["steps"] == pytest.approx(6.52)
    assert record["costs"]["quiet"] == {"step_s": 0.010, "verify_s": 100.0, "tokens": 6}


def test_a_run_at_the_quiet_costs_is_the_figure(tiny_app, timed, quiet):
    """The same run against quiet costs it keeps within 1.5× of (65.2 ms against 45 ms: 1.45×) is a result:
    its speedup headlines and the race plays."""
    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5], [1.5]
    change(AUTOREGRESSIVE, 0, steps_of(0.0652))
    quiet[0][0] = StepCosts(step_s=0.045, verify_s=100.0, tokens=6)
    out = ask(tiny_app)[-1]
    assert out.status.startswith("\u2713 TABED ran 3.00× as fast as plain decoding; ")
    assert "Timings unreliable" not in out.status and out.state.last.frames
    assert json.loads(next(Path(out.state.export_dir).glob("*.json")).read_text())["costs"]["far"] is False


def test_a_repeat_far_off_the_quiet_costs_is_left_out_of_the_median(tiny_app, timed, quiet):
    """Run 1's checks took 100 s each (the quiet cost of one: 1 s): the median and range are runs 2 and 3's (their
    steps and checks, the tiny pair's own, cost far less than the quiet ones)."""
    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5, 1.0, 2.0], [1.5]
    quiet[0][0] = StepCosts(step_s=1.0, verify_s=1.0, tokens=6)
    change(SPECULATIVE, 0, lambda result: [setattr(block, "verify_s", 100.0) for block in result.blocks])
    out = ask(tiny_app, repeat=3)[-1]
    assert "ran slower than plain decoding (0.75×; the median of 2 runs, 0.75–1.50×)" in out.status.splitlines()[0]
    assert "Timings unreliable" not in out.status


def test_a_machine_busy_since_the_pair_was_loaded_gives_no_figure(tiny_app, timed, quiet):
    """The probe before the run found the machine busy and none has found it quiet: nothing to hold the run
    against, so no figure; once a probe finds it quiet, the next run's figure stands."""
    times, runs, _ = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5], [1.5]
    costs, probes = quiet
    out = ask(tiny_app)[-1]
    assert out.status.startswith("\u2713 TABED's timings are unreliable (the machine was busy): no speedup")
    assert "- \u26a0\ufe0f Timings unreliable: the machine was busy as this run began." in out.status
    assert "Its clock read 3.00×" in out.status
    costs[0] = StepCosts(step_s=0.045, verify_s=100.0, tokens=6)
    assert ask(tiny_app)[-1].status.startswith("\u2713 TABED ran 3.00× as fast as plain decoding; ")
    assert len(probes) == 2
    costs[0] = None  # busy again, the costs fresh: no probe, the run held against them
    assert ask(tiny_app)[-1].status.startswith("\u2713 TABED ran 3.00× as fast")
    assert len(probes) == 2


def test_when_the_checks_are_the_slower_kind_the_warning_and_the_record_say_so(tiny_app, timed, quiet):
    """Plain steps 12 ms against 10 ms quiet (1.2×), checks of 5 s against 1 s for 6 tokens and less: the checks
    are the slower kind, and the warning's factor is theirs; the record keeps each kind's own."""
    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5], [1.5]
    change(AUTOREGRESSIVE, 0, steps_of(0.012))
    change(SPECULATIVE, 0, lambda result: [setattr(block, "verify_s", 5.0) for block in result.blocks])
    quiet[0][0] = StepCosts(step_s=0.010, verify_s=1.0, tokens=6)
    out = ask(tiny_app)[-1]
    checks = [5.0 / (0.010 + len(block.tree or block.draft) * (1.0 - 0.010) / 5)
              for block in runs[SPECULATIVE][0].blocks[1:]]
    factor = sorted(checks)[len(checks) // 2] if len(checks) % 2 else sum(sorted(checks)[len(checks) // 2 - 1:
                                                                                   len(checks) // 2 + 1]) / 2
    assert f"the big model took {factor:.1f}× as long as quiet." in out.status.splitlines()[1]
    costs = json.loads(next(Path(out.state.export_dir).glob("*.json")).read_text())["costs"]
    assert costs["step_s"] == pytest.approx(0.012) and costs["steps"] == pytest.approx(1.2)
    assert costs["checks"] == pytest.approx(factor) and costs["far"]


def test_a_busy_probe_after_quiet_ones_still_judges_the_run_by_the_costs_it_kept(tiny_app, timed, quiet):
    """The costs were measured quiet; a minute later the probe finds the machine busy: the run is held against
    the costs kept, and within 1.5× of them it is a result."""
    from tabed.page.pairs import REFRESH_S

    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5], [1.5]
    change(AUTOREGRESSIVE, 1, steps_of(0.0652))
    costs, probes = quiet
    clock = [0.0]
    tiny_app.PAIRS.quiet.clock = lambda: clock[0]
    costs[0] = StepCosts(step_s=0.045, verify_s=100.0, tokens=6)
    ask(tiny_app)
    clock[0], costs[0] = REFRESH_S + 1, None
    out = ask(tiny_app)[-1]
    assert len(probes) == 2 and out.status.startswith("\u2713 TABED ran 3.00× as fast as plain decoding; ")


def test_a_stop_as_tabed_ends_is_no_run_to_judge(tiny_app, timed, quiet):
    """With quiet costs known, Stop pressed as TABED's answer ends: plain decoding never ran, so there are no
    costs to hold against it (and nothing fails for it)."""
    times, runs, change = timed
    times[SPECULATIVE][:], times[AUTOREGRESSIVE][:] = [0.5], [1.5]
    quiet[0][0] = StepCosts(step_s=0.010, verify_s=1.0, tokens=6)
    change(SPECULATIVE, 0, "stop")
    out = ask(tiny_app)[-1]
    assert out.status.startswith("\u25a0 Stopped before plain decoding began")
    assert "costs" not in json.loads(next(Path(out.state.export_dir).glob("*.json")).read_text())
