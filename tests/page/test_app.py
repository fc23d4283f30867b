"""The app's event handlers, driven directly with a tiny pair: what they yield, errors, Stop."""

import html
import itertools
import json
import re
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from PIL import Image

import app
from conftest import serving, status_text, workers_alive
from tabed.engine import resting, session
from tabed.engine.events import Finished
from tabed.models.pair import ModelPair
from tabed.page import render, view, worker
from tabed.page.controls import MODES
from tabed.page.view import OUTPUTS, STOPPED_MARK, Frame

SETTINGS = dict(preset="teaching", methods=["M", "T"], mode=MODES[0], rule="w-grid", window=0, gamma=5,
                max_new_tokens=24, temperature=0.0, seed=0, compare_ar=True, adaptive=True, tree_width=1,
                tree_policy="ensemble", tree_blocks="all", hedge_first=True)


def settings(**changes) -> dict:
    """The handlers' settings by name, these changed."""
    return {**SETTINGS, **changes}


@pytest.fixture
def tiny_app(pair):
    """The app with the tiny test pair standing in for the teaching preset."""
    with serving(pair) as served:
        yield served


@pytest.fixture
def image_path(tmp_path, image):
    path = tmp_path / "picture.png"
    image.save(path)
    return str(path)


def frame(values) -> Frame:
    """A handler's output, by name; the metrics as their rows (`header` keeps their column names)."""
    out = Frame(*values)
    out.html_status, out.status = out.status, status_text(out.status)  # its words, and its markup apart
    if isinstance(out.metrics, gr.Dataframe):
        out.header, out.metrics = out.metrics.headers, out.metrics.value["data"]
    return out


def last_run(conversation) -> dict:
    """The session's last run as its download has it (the JSON the page offers)."""
    return json.loads(next(Path(conversation.export_dir).glob("*.json")).read_text())


def final(outputs) -> Frame:
    return frame(outputs[-1])


def test_run_streams_coloured_tokens_then_metrics_and_exports(tiny_app, image_path, monkeypatch):
    monkeypatch.setattr(session, "BUSY_SHARE", 0.0)  # the figure in the verdict, whatever else the machine runs
    outputs = list(tiny_app.run(image_path, "w1 w2 w3", None, **settings(hedge_first=False)))
    out = final(outputs)
    status, tabed_html, plain_html, metrics, figure = out.status, out.tabed, out.plain, out.metrics, out.weights
    blocks, chat, state, files, trees = out.blocks, out.chat, out.state, out.downloads, out.trees
    assert status.startswith("\u2713 ") and re.match(r"\u2713 TABED ran .*[\d.]+×", status)
    streamed = [re.findall(r'<span class="tk [^>]*>[^<]*</span>', frame(o).tabed) for o in outputs
                if isinstance(frame(o).tabed, str) and frame(o).tabed]  # each frame's tokens, as shown
    assert len(streamed) > 1  # a token once shown stays, as it was (a word may be wrapped to keep it on one line)
    assert all(later[:len(earlier)] == earlier for earlier, later in zip(streamed, streamed[1:], strict=False))
    assert "tk-accepted" in tabed_html and "tk-rejected" in tabed_html
    assert "tk-corrected" in tabed_html or "tk-bonus" in tabed_html
    assert "tk-plain" in plain_html
    result = last_run(state)["results"]
    assert result["speculative"]["token_ids"] == result["autoregressive"]["token_ids"]
    rows = {row[0]: row for row in metrics}
    assert "speedup (decode time)" in rows and render.BLOCK_EFFICIENCY in rows
    assert float(rows[render.BLOCK_EFFICIENCY][1]) > 1.0
    assert {trace.name for trace in figure.data} - {render.RESTED} == {"accepted drafts", "weight of M", "weight of T"}
    assert len(blocks.value["data"]) == result["speculative"]["metrics"]["target_forwards"]
    drafted = [row[blocks.value["headers"].index("drafted (why it stopped)")] for row in blocks.value["data"]]
    assert any("unsure: " in cell for cell in drafted)  # each block says how long its draft was, and why
    assert {b["stop"] for b in result["speculative"]["blocks"]} <= {"unsure", "cap", "budget", "eos"}
    assert chat[-1]["role"] == "assistant" and chat[-1]["content"] == result["speculative"]["text"]
    assert [re.sub(r"\d{8}-\d{6}", "T", f.rsplit("/", 1)[-1]) for f in files] == ["tabed-T-run1.json",
                                                                                   "tabed-T-run1-report.html"]
    assert "set the tree width above 1" in trees.layout.title.text  # chains: the trees plot says how to get one


def test_the_block_table_says_which_methods_rested(tiny_app, image_path, monkeypatch):
    monkeypatch.setattr(resting, "REST_AFTER", 1)  # a method rests after one block at weight 0
    outputs = list(tiny_app.run(image_path, "w1 w2 w3", None, **settings(methods=["M", "T", "C", "P"],
                                                                        max_new_tokens=40)))
    figure, blocks, state = final(outputs).weights, final(outputs).blocks, final(outputs).state
    headers, data = blocks.value["headers"], blocks.value["data"]
    symbols = {trace.name: list(trace.marker.symbol) for trace in figure.data if trace.name.startswith("weight")}
    rested = 0
    for i, (row, block) in enumerate(zip(data, last_run(state)["results"]["speculative"]["blocks"], strict=True)):
        for method in "MTCP":
            resting_here = method in block["resting"]
            rested += resting_here
            assert (symbols[f"weight of {method}"][i] == "circle-open") == resting_here  # the chart marks it
            if resting_here:
                assert f"{method} rests" in row[headers.index("weights")].split(" · ")  # never "resting T"
                assert row[headers.index(f"{method} guesses")] == "(resting)"
    assert rested and render.RESTED in {trace.name for trace in figure.data}  # the legend says what an open dot is


@pytest.mark.parametrize("width, policy", [(3, "ensemble"), (2, "members")])
def test_trees_from_the_page_are_drawn_block_by_block(tiny_app, image_path, width, policy):
    outputs = list(tiny_app.run(image_path, "w1 w2 w3", None,
                                **settings(tree_width=width, tree_policy=policy, max_new_tokens=40)))
    out = final(outputs)
    status, blocks, state, files, trees = out.status, out.blocks, out.state, out.downloads, out.trees
    assert status.startswith("\u2713 ")
    result = last_run(state)["results"]["speculative"]
    assert result["token_ids"] == last_run(state)["results"]["autoregressive"]["token_ids"]
    config = last_run(state)["request"]["config"]
    assert (config["tree_width"], config["tree_policy"]) == (width, policy)
    nodes = [node for block in result["blocks"] for node in block["tree"]]
    assert nodes and {"token", "parent", "proposer", "accepted"} <= set(nodes[0])
    drafted = [row[blocks.value["headers"].index("drafted (why it stopped)")] for row in blocks.value["data"]]
    assert all(" deep, " in cell and " nodes" in cell or cell == "0, the answer's token limit" for cell in drafted)
    assert " deep, " in drafted[0]  # a last block with one token left to emit drafts nothing ("0, ...")
    paths = next(trace for trace in trees.data if trace.name == "accepted node")
    branches = next(trace for trace in trees.data if trace.name == "rejected node")
    assert len(paths.x) == sum(node["accepted"] for node in nodes)
    assert len(branches.x) == sum(not node["accepted"] for node in nodes) > 0
    assert "target p=" in paths.hovertext[0] and "ensemble p=" in branches.hovertext[0]
    page = Path(files[1]).read_text()
    assert len(files) == 2 and page.count('class="plotly-graph-div"') == 2  # the weights, then the trees


def test_a_tree_in_the_first_block_only_from_the_page(tiny_app, image_path):
    outputs = list(tiny_app.run(image_path, "w1 w2 w3", None,
                                **settings(tree_width=3, tree_blocks="first", max_new_tokens=40)))
    out = final(outputs)
    status, blocks, state, trees = out.status, out.blocks, out.state, out.trees
    assert status.startswith("\u2713 ")
    result = last_run(state)["results"]["speculative"]
    assert result["token_ids"] == last_run(state)["results"]["autoregressive"]["token_ids"]
    assert last_run(state)["request"]["config"]["tree_blocks"] == "first"
    drafted = [row[blocks.value["headers"].index("drafted (why it stopped)")] for row in blocks.value["data"]]
    assert len(drafted) > 1 and " deep, " in drafted[0] and not any(" deep, " in cell for cell in drafted[1:])
    drawn = sum(len(trace.x) for trace in trees.data if trace.name in ("accepted node", "rejected node"))
    assert drawn == len(result["blocks"][0]["tree"]) > 0


def test_by_default_the_first_block_hedges_and_the_trees_chart_shows_it(tiny_app, image_path):
    """With a picture the first block forks where the ensemble is unsure, later blocks are chains, and the
    trees chart draws that block; without one there is nothing to hedge between, and the chart says so."""
    out = final(list(tiny_app.run(image_path, "w1 w2 w3", None, **settings(max_new_tokens=40))))
    status, state, trees = out.status, out.state, out.trees
    assert status.startswith("\u2713 ")
    result = last_run(state)["results"]["speculative"]
    assert result["token_ids"] == last_run(state)["results"]["autoregressive"]["token_ids"]
    assert last_run(state)["request"]["config"]["hedge_first"] and result["blocks"][0]["tree"]
    assert not any(block["tree"] for block in result["blocks"][1:])
    drawn = sum(len(trace.x) for trace in trees.data if trace.name in ("accepted node", "rejected node"))
    assert drawn == len(result["blocks"][0]["tree"]) and trees.layout.title.text.startswith("Token trees (hover")
    text_only = final(list(tiny_app.run(None, "w1 w2 w3", None, **settings(max_new_tokens=40))))
    assert "the first block did not fork" in text_only.trees.layout.title.text
    assert not any(block["tree"] for block in last_run(text_only.state)["results"]["speculative"]["blocks"])
    single = final(list(tiny_app.run(image_path, "w1 w2 w3", None, **settings(methods=["M"], mode=MODES[2]))))
    assert "set the tree width above 1" in single.trees.layout.title.text  # one method: nothing to hedge between


@pytest.mark.parametrize("methods, width, hedge, mode, shown", [
    ("MT", 1, True, 0, True), ("MT", 1, False, 0, False), ("MT", 2, False, 0, True), ("MT", 1, True, 1, False),
    ("M", 1, True, 2, False), ("M", 3, True, 2, True), ("MN", 1, True, 0, False), ("", 1, True, 0, False)])
def test_the_trees_chart_is_shown_while_a_block_may_draft_a_tree(methods, width, hedge, mode, shown):
    """With trees, or TABED's hedged first block (a static ensemble, a single method or one model method
    beside N never hedges; nor does a spec that is no spec yet)."""
    assert app.trees_shown(list(methods), MODES[mode], width, hedge)["visible"] is shown


def test_on_a_cpu_both_sides_decode_in_a_worker_with_one_torch_thread(tiny_app, image_path, monkeypatch):
    """A second OpenMP team beside the loading thread's makes the drafter's small operations wait for
    sleeping threads (see tabed/page/worker.py); the handler's thread keeps its own count."""
    seen = []

    def counting(generate):
        def wrapped(*args, **kwargs):
            seen.append(torch.get_num_threads())
            yield from generate(*args, **kwargs)
        return wrapped

    for name in ("speculative_generate", "autoregressive_generate"):
        monkeypatch.setattr(worker, name, counting(getattr(worker, name)))
    before = torch.get_num_threads()
    out = final(list(tiny_app.run(image_path, "w1 w2", None, **settings())))
    assert "×" in out.status and seen == [worker.CPU_THREADS] * 2 == [1, 1]
    assert torch.get_num_threads() == before


def test_a_stop_that_overtakes_its_run_stops_it_as_it_begins(monkeypatch):
    """Stop is not queued and Run is: a Stop clicked right after Run may reach the server first."""
    stops = app.StopFlags()
    stops.stop("a")  # nothing running yet
    assert stops.begin("a").is_set() and not stops.begin("b").is_set()
    assert not stops.begin("a").is_set()  # it stopped one run, not every later one
    monkeypatch.setattr(app.StopFlags, "EARLY_S", 0.05)
    stops.stop("c")
    time.sleep(0.1)
    assert not stops.begin("c").is_set()  # a Stop long before a Run is forgotten
    stops.stop("d")
    time.sleep(0.1)
    stops.stop("e")
    assert list(stops.early) == ["e"]  # and not kept


def test_n_from_the_page_is_its_own_method(tiny_app):
    outputs = list(tiny_app.run(None, "w1 w2 w1 w2", None, **settings(methods=["M", "T", "N"])))
    out = final(outputs)
    status, figure, blocks, state = out.status, out.weights, out.blocks, out.state
    assert status.startswith("\u2713 ")
    assert "weight of N" in {trace.name for trace in figure.data} and "N guesses" in blocks.value["headers"]
    result = last_run(state)["results"]
    assert result["speculative"]["spec"] == "tabed-MTN"
    assert result["speculative"]["token_ids"] == result["autoregressive"]["token_ids"]


def test_a_fixed_gamma_from_the_page_drafts_gamma_tokens(tiny_app):
    state = final(list(tiny_app.run(None, "w1 w2", None, **settings(gamma=3, adaptive=False)))).state
    blocks = last_run(state)["results"]["speculative"]["blocks"]
    assert {(b["stop"], len(b["draft"])) for b in blocks[:-1]} == {("fixed", 3)}


def test_follow_up_continues_the_conversation(tiny_app, image_path):
    state = final(list(tiny_app.run(image_path, "w1 w2", None, **settings()))).state
    outputs = list(tiny_app.ask_follow_up(image_path, "w3 w4", state, **settings()))
    chat, state = final(outputs).chat, final(outputs).state
    assert len(chat) == 4 and chat[2] == {"role": "user", "content": "w3 w4"}
    assert last_run(state)["request"]["turn"] == 2


def test_token_text_is_escaped(tiny_app):
    from tabed.engine.events import TokenEvent
    from tabed.page.render import TokenStream, _span

    class AngleTokenizer:
        def decode(self, ids, skip_special_tokens=True):
            return "".join("<b>&" for _ in ids)

    stream = TokenStream(AngleTokenizer())
    stream.token(TokenEvent(index=0, token_id=1, step_s=0.01, elapsed_s=0.01))
    assert "&lt;b&gt;&amp;" in stream.html and "<b>" not in stream.html
    assert "&quot;" in _span("accepted", "a", 'quote " title') and "<b>" not in _span("accepted", "<b>", "t")


def test_several_pictures_go_with_the_first_prompt(tiny_app, image_path, tmp_path):
    other = tmp_path / "other.png"
    Image.new("RGB", (40, 40), (20, 200, 30)).save(other)
    gallery = [(image_path, None), (str(other), None)]
    state = final(list(tiny_app.run(gallery, "w1 w2", None, **settings(max_new_tokens=8)))).state
    assert state.images == [image_path, str(other)]
    assert last_run(state)["request"]["images"] == 2
    results = last_run(state)["results"]
    assert results["speculative"]["token_ids"] == results["autoregressive"]["token_ids"]
    outputs = list(tiny_app.ask_follow_up(gallery, "w3", state, **settings(max_new_tokens=8)))
    status, chat = final(outputs).status, final(outputs).chat
    assert status.startswith("\u2713 ")
    assert chat[0]["content"].startswith("[2 pictures] ") and len(chat) == 4
    status = final(list(tiny_app.ask_follow_up([(image_path, None)], "w4", state, **settings()))).status
    assert "same pictures" in status


def test_an_unreadable_upload_is_taken_off_and_the_readable_ones_stay(image_path, tmp_path):
    broken = tmp_path / "upload-123.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n not a picture")
    gallery = [{"image": {"path": image_path, "orig_name": "good.png"}, "caption": None},
               {"image": {"path": str(broken), "orig_name": "broken.png"}, "caption": None}]
    kept, status = app.check_upload(gallery)
    status = status_text(status)
    assert kept == [image_path]
    assert status.startswith("\u26a0\ufe0f cannot read image broken.png") and str(tmp_path) not in status
    assert app.check_upload(gallery[:1]) == (app.gr.update(), app.gr.update())
    assert app.check_upload(gallery[1:])[0] is None


def test_eight_pictures_are_taken_and_a_ninth_is_left_out(image_path):
    """The most pictures a run takes, at the edge: eight pass, nine are refused (a run) or the ninth is taken off
    the gallery with a line naming it (an upload)."""
    from tabed.errors import InputError
    from tabed.page.conversation import MAX_PICTURES, checked_upload, picture_paths

    assert MAX_PICTURES == 8 and picture_paths([(image_path, None)] * 8) == [image_path] * 8
    with pytest.raises(InputError, match="pictures: at most 8 at once; got 9"):
        picture_paths([(image_path, None)] * 9)
    gallery = [{"image": {"path": image_path, "orig_name": f"p{i}.png"}, "caption": None} for i in range(9)]
    assert checked_upload(gallery) == ([image_path] * 8, "p8.png left out: at most 8 pictures at once")
    assert checked_upload(gallery[:8]) == ([image_path] * 8, "")


def test_the_examples_start_with_their_pictures():
    starts, follow_ups = app.BUNDLED.starts(), app.BUNDLED.follow_ups()
    counts = sorted(len(pictures or []) for pictures, _ in starts)
    assert counts[0] == 0 and counts[-1] == 3  # no picture, up to three odd ones at once
    assert all(Path(p).exists() for pictures, _ in starts for p in pictures or [])
    assert follow_ups


@pytest.mark.parametrize("mode", ["RGBA", "LA", "L", "P", "1", "I;16", "CMYK"])
def test_every_image_mode_runs(tiny_app, tmp_path, mode):
    path = tmp_path / ("picture.tiff" if mode == "CMYK" else "picture.png")
    if mode == "I;16":
        Image.fromarray(np.arange(48 * 40, dtype=np.uint16).reshape(40, 48) * 30).save(path)
    else:
        Image.new("RGB", (48, 40), (200, 30, 30)).convert(mode).save(path)
    status = final(list(tiny_app.run(str(path), "w1", None, **settings(max_new_tokens=4)))).status
    assert status.startswith("\u2713 "), status


@pytest.mark.parametrize(
    ("prompt", "image", "changes", "message"),
    [
        ("", None, {}, "type a prompt first"),
        ("   ", None, {}, "type a prompt first"),
        ("w1", "missing.png", {}, "image not found"),
        ("w1", "corrupt", {}, "cannot read image"),
        ("w1", "huge", {}, "image too large"),
        ("w1", None, {"max_new_tokens": 0}, "max new tokens must be a whole number from 1 to 1024; got 0"),
        ("w1", None, {"max_new_tokens": 100_000}, "from 1 to 1024; got 100000"),
        ("w1", None, {"methods": []}, "tick at least one"),
        ("w1", None, {"methods": ["M"]}, "at least two methods"),
        ("w1", None, {"methods": ["M", "T"], "mode": MODES[2]}, "uses one method"),
        ("w1", None, {"gamma": 0}, "γ (draft tokens per block) must be"),
        ("w1", None, {"methods": ["N"], "mode": MODES[2]}, "beside a model method"),
        (" ".join(["w1"] * 600), None, {}, "fills the target's context"),
    ],
)
def test_bad_input_gives_a_message_not_a_trace(tiny_app, tmp_path, prompt, image, changes, message):
    if image == "corrupt":
        image = tmp_path / "broken.png"
        image.write_bytes(b"\x89PNG\r\n\x1a\n this is not an image")
    elif image == "huge":
        image = tmp_path / "huge.png"
        Image.new("L", (9000, 8000)).save(image)
    outputs = list(tiny_app.run(str(image) if image else None, prompt, None, **settings(**changes)))
    status = final(outputs).status
    assert status.startswith("\u26a0\ufe0f") and message in status, status
    assert "Traceback" not in status
    assert workers_alive() == 0


def test_gpu_presets_are_refused_on_a_machine_without_one(tiny_app, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    status = final(list(tiny_app.run(None, "w1", None, **settings(preset="llava-1.5-7b")))).status
    assert status.startswith("\u26a0\ufe0f") and "needs a GPU" in status


def _workers_joined() -> None:
    """Wait for every decoding thread to end, however busy the machine (one that ignored its stop still ends,
    with its whole answer: the tests tell the two apart by what was decoded, never by the clock)."""
    for thread in threading.enumerate():
        if thread.name == worker.WORKER_THREAD:
            thread.join()


def test_closing_the_handler_stops_the_worker(tiny_app, image_path, monkeypatch):
    """What Gradio does when Stop cancels the event: the worker stops within a block, so TABED's answer is
    cut short and plain decoding never starts (a worker left running would finish both)."""
    made = []
    monkeypatch.setattr(tiny_app, "ComparisonWorker", lambda *a, **k: made.append(worker.ComparisonWorker(*a, **k))
                        or made[-1])
    events = tiny_app.run(image_path, "w1 w2", None, **settings(max_new_tokens=400, compare_ar=True))
    for output in events:
        if "tk-" in str(frame(output).tabed):
            break  # TABED tokens are streaming
    assert workers_alive() == 1
    events.close()
    _workers_joined()
    results = [item.event.result for item in made[0].drain(0) if isinstance(item, worker.PhaseEvent)
               and isinstance(item.event, Finished)]
    assert [(result.mode, result.stopped) for result in results] == [("speculative", True)]
    assert len(results[0].token_ids) < 400


class StopClient:
    """What Gradio passes for a browser session (its `gr.Request`): only the session id matters here."""

    def __init__(self, name: str) -> None:
        self.session_hash = name


def _run_until(app, image_path, request, condition, **changes):
    """Start a long run, press Stop (for this session) at the first frame meeting `condition`; returns the
    frames after Stop, once the decoding thread has ended."""
    events = app.run(image_path, "w1 w2", None, **settings(**{"max_new_tokens": 400, "compare_ar": True,
                                                              **changes}), request=request)
    for output in events:
        if condition(output):
            break
    app.request_stop(request)
    after = list(events)
    _workers_joined()
    return after


def _tabed_past_block(count: int):
    """A frame whose status says TABED is at block `count` or later (frames may skip a block number)."""
    def condition(output) -> bool:
        status = str(frame(output).status)
        shown = re.search(r"block (\d+)", status)
        return shown is not None and "TABED decoding" in status and int(shown.group(1)) >= count
    return condition


def _metric_names(metrics) -> list[str]:
    return [row[0] for row in metrics]


def _never_done(frames) -> None:
    """No frame after Stop says the run was done, or claims a speedup: not even the one ending the stream."""
    statuses = [str(frame(output).status) for output in frames if not isinstance(frame(output).status, dict)]
    assert statuses and not any(status.startswith("\u2713") or "×" in status for status in statuses), statuses


def test_run_pressed_while_a_run_decodes_is_said_by_that_runs_frames(tiny_app, image_path):
    """Run pressed during a run queues the new run behind it (one decode at a time), and the running run's frames
    overwrite the status that said so: each of them says it instead, until the queued run begins."""
    queued = app.QUEUED  # `frame` gives the status as text
    request = StopClient("queued")
    events = tiny_app.run(image_path, "w1 w2", None, **settings(max_new_tokens=400), request=request)
    assert queued not in str(frame(next(events)).status)
    tiny_app.run_starts(StopClient("elsewhere"))  # another session's Run: its own status says it waits
    assert queued not in str(frame(next(events)).status)
    tiny_app.run_starts(request)
    statuses = [str(out.status) for out in map(frame, events) if isinstance(out.status, str)]
    assert statuses and all(said.startswith(queued) for said in statuses), statuses
    assert "\u2713" in statuses[-1]  # the run's end, its verdict under the line
    again = [str(out.status) for out in map(frame, tiny_app.run(image_path, "w3", None, **settings(),
                                                                  request=request))]
    assert again and not any(queued in said for said in again)  # the queued run has begun
    assert not tiny_app.STOPS.asked and not tiny_app.STOPS.flags  # nothing left behind


def test_stop_during_tabed_shows_stopped_and_keeps_the_partial_answer(tiny_app, image_path):
    request = StopClient("stop-during-tabed")
    after = _run_until(tiny_app, image_path, request, _tabed_past_block(3))
    out = final(after)
    status, tabed_html, plain_html, metrics, figure = out.status, out.tabed, out.plain, out.metrics, out.weights
    blocks, chat, state = out.blocks, out.chat, out.state
    _never_done(after)
    assert status.startswith("\u25a0 Stopped after") and "not added to the conversation" in status
    assert "tk-accepted" in tabed_html and tabed_html.endswith(STOPPED_MARK)
    assert "tk-plain" not in plain_html  # plain decoding never started
    assert render.BLOCK_EFFICIENCY in _metric_names(metrics) and "speedup (decode time)" not in _metric_names(metrics)
    assert figure is not None and len(blocks.value["data"]) >= 3
    assert chat == [] and state.turns == []  # a half answer is not a finished turn
    assert not tiny_app.STOPS.flags  # nothing left behind
    again = final(list(tiny_app.run(image_path, "w3", state, **settings(), request=request)))
    assert again.status.startswith("\u2713 ")


def test_stop_during_plain_decoding_says_the_plain_side_was_stopped(tiny_app, image_path):
    request = StopClient("stop-during-plain")
    after = _run_until(tiny_app, image_path, request,
                       lambda o: "plain decoding (the target alone)…" in str(frame(o).status))
    out = final(after)
    status, tabed_html, plain_html, metrics = out.status, out.tabed, out.plain, out.metrics
    state, files = out.state, out.downloads
    _never_done(after)
    assert status.startswith("\u25a0 Stopped plain decoding") and "TABED's answer is complete" in status
    assert not tabed_html.endswith(STOPPED_MARK)
    assert "tk-plain" in plain_html and plain_html.endswith(STOPPED_MARK)
    assert "speedup (decode time)" not in _metric_names(metrics)  # no speed claimed from unequal answers
    assert "speedup" not in last_run(state) and files  # nor in the download, which is there
    answer = last_run(state)["results"]["speculative"]["text"]
    assert state.turns == [("w1 w2", answer)] and out.chat[-1]["content"] == answer  # TABED's answer was complete
    assert "stopped before both sides finished" in next(tiny_app.replay_race(state))


def test_stop_before_the_first_block(tiny_app, image_path):
    """Stop pressed while the pair loads: the run ends at once, says so, and leaves the page as it was."""
    request = StopClient("stop-while-loading")
    tiny_app.PAIRS.name = "loading"  # not loaded: the first frame is the loading message
    after = _run_until(tiny_app, image_path, request, lambda o: "Loading" in str(frame(o).status))
    assert final(after).status.startswith("\u25a0 Stopped before decoding began")
    assert all(changed(frame(o)) == ["status"] for o in after)
    assert workers_alive() == 0


def test_stop_only_stops_its_own_session(tiny_app, image_path):
    tiny_app.request_stop(StopClient("another-session"))
    status = final(list(tiny_app.run(image_path, "w1", None, **settings(max_new_tokens=12),
                                     request=StopClient("this-session")))).status
    assert status.startswith("\u2713 ")


def test_stop_ends_the_replay_race_where_it_is(tiny_app, image_path):
    request = StopClient("stop-the-race")
    state = final(list(tiny_app.run(image_path, "w1", None, **settings(max_new_tokens=60), request=request))).state
    slow = {phase: [(t * 50, text) for t, text in frames] for phase, frames in state.last.frames.items()}
    state.last = replace(state.last, frames=slow)
    race = tiny_app.replay_race(state, request=request)
    next(race)
    tiny_app.request_stop(request)
    frames = list(race)
    assert len(frames) == 1 and "Stopped" in frames[0] and "\u2714" not in frames[0]


class OutOfMemoryTarget(torch.nn.Module):
    """A stand-in target whose forward fails the way a full GPU does."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = model.config
        self.generation_config = model.generation_config
        self.dtype = model.dtype  # as a transformers model has: a tree's attention mask is made in it

    def get_output_embeddings(self):
        return self.model.get_output_embeddings()

    def forward(self, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")


def test_out_of_memory_is_a_message_and_the_app_keeps_serving(tiny_app, pair, image_path):
    broken = ModelPair(OutOfMemoryTarget(pair.target), pair.drafter, pair.target_processor,
                       pair.drafter_processor, pair.device, pair.dtype, "teaching")
    tiny_app.PAIRS.pair = broken
    status = final(list(tiny_app.run(image_path, "w1", None, **settings()))).status
    assert "ran out of memory" in status and "Traceback" not in status
    tiny_app.PAIRS.pair = pair
    assert final(list(tiny_app.run(image_path, "w1", None, **settings()))).status.startswith("\u2713 ")


def test_replay_race_plays_both_answers(tiny_app, image_path):
    state = final(list(tiny_app.run(image_path, "w1", None, **settings(max_new_tokens=8)))).state
    frames = list(tiny_app.replay_race(state))
    assert "TABED" in frames[-1] and "plain decoding" in frames[-1] and frames[-1].count("\u2714") == 2
    ended = {side: state.last.frames[side][-1][0] for side in ("speculative", "autoregressive")}  # each its own clock
    assert f"TABED \u2714 done in {ended['speculative']:.2f} s" in frames[-1]
    assert f"plain decoding \u2714 done in {ended['autoregressive']:.2f} s" in frames[-1]
    assert "Run a prompt" in next(tiny_app.replay_race(None))
    assert "(at the measured pace)" in frames[-1]
    assert f"race clock {max(ended.values()):.2f} s" in frames[-1]  # stopped where the slower side ended


@pytest.mark.parametrize("pace, said", [(0.5, "(at ×0.5 of the measured pace, slowed to follow)"),
                                        (0.25, "(at ×0.25 of the measured pace, slowed to follow)")])
def test_the_race_replays_at_a_half_or_a_quarter_of_the_measured_pace_and_says_so(tiny_app, image_path, pace, said,
                                                                                    monkeypatch):
    """The race clock runs at the pace asked: each side ends at its measured time over the pace, on the race's
    own clock, which keeps the measured seconds (a slowed race still says "done in" the measured time)."""
    state = final(list(tiny_app.run(image_path, "w1", None, **settings(max_new_tokens=8)))).state
    for bad in (2.0, 0.0, "×½", True, None):
        refused = list(itertools.islice(tiny_app.replay_race(state, bad), 2))  # (a race at pace 0 never ends)
        assert refused == [f"<i>pace must be one of 1, 0.5, 0.25; got {bad!r}</i>"]
    now = [0.0]
    monkeypatch.setattr(view, "time", SimpleNamespace(monotonic=lambda: now[0]))
    stop = threading.Event()
    monkeypatch.setattr(stop, "wait", lambda seconds: now.__setitem__(0, now[0] + seconds))  # a clock of its own
    end = max(frames[-1][0] for frames in state.last.frames.values())
    frames = list(view.race_frames(state, stop, pace))
    assert said in frames[-1] and "✔" in frames[-1]
    assert now[0] == pytest.approx(end / pace, abs=view.RACE_FRAME_S)  # slowed by the pace
    assert f"race clock {end:.2f} s" in frames[-1]  # where the slower side ended, not the frame after
    long = {side: [(t * 100 / end, text) for t, text in frames] for side, frames in state.last.frames.items()}
    state.last = replace(state.last, frames=long)  # a 100 s race: past 20 s, sped up to 20 s, then paced
    now[0] = 0.0
    frames = list(view.race_frames(state, stop, pace))
    assert now[0] == pytest.approx(20 / pace, abs=view.RACE_FRAME_S)
    assert f"(×{5 * pace:.1f} faster than measured)" in frames[-1]


def _with_stand_in_spaces(tmp_path, script: str, extra_env: dict | None = None) -> str:
    """Run `script` with a stand-in `spaces` package (the real one needs a Space); returns its stdout."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "spaces.py").write_text(
        "import inspect\nWRAPPED = []\n"
        "def GPU(function=None, duration=None):\n"
        "    def wrap(f):\n"
        "        WRAPPED.append((f.__name__, inspect.isgeneratorfunction(f), duration))\n"
        "        return f\n"
        "    return wrap(function) if function is not None else wrap\n")
    root = Path(__file__).resolve().parents[2]
    temp = {name: os.environ[name] for name in ("TMPDIR", "GRADIO_TEMP_DIR")}  # the run's scratch (conftest)
    env = {"PYTHONPATH": f"{tmp_path}:{root}", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", **temp,
           **(extra_env or {})}
    # loading times the linear layers' two paths (models/matmul.py): about 100 s on a 2-core CPU another job shares
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=root,
                         timeout=400)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow
def test_on_zerogpu_the_handler_is_wrapped_by_spaces_gpu(tmp_path):
    """The app imports `spaces` first and decorates its generator handler with `spaces.GPU`, the duration
    growing with max new tokens."""
    script = ("import sys, torch; assert 'torch' in sys.modules\n"
              "import app, spaces\n"
              "(name, generator, duration), = spaces.WRAPPED\n"
              "from tabed.page.request import Request\n"
              "seconds = [duration(False, Request(max_new_tokens=n), None) for n in (96, 512)]\n"
              "print(name, generator, *seconds, app.PAIRS.name)\n")
    assert _with_stand_in_spaces(tmp_path, script).split() == ["respond", "True", "78", "286", "None"]


@pytest.mark.slow
@pytest.mark.slow
def test_on_zerogpu_the_default_pair_is_loaded_at_import_and_runs_eager(tmp_path):
    """On ZeroGPU the default pair is loaded when the app is imported (so `spaces` packs its weights once),
    with dynamic caches (CUDA graphs cannot outlive a request there), and the page says so."""
    script = ("import app\n"
              "pair = app.PAIRS.pair\n"
              "from tabed.page.pairs import ZERO_GPU_NOTE\n"
              "print(app.PAIRS.name, pair.cache, app.PAIRS.warm, ZERO_GPU_NOTE in pair.notes)\n"
              "assert app.PAIRS.get('teaching') is pair and app.PAIRS.warm\n")
    out = _with_stand_in_spaces(tmp_path, script, {"SPACES_ZERO_GPU": "true"})
    assert out.split() == ["teaching", "dynamic", "False", "True"]


def test_the_page_says_what_the_pair_can_see(tiny_app):
    assert "synthetic world" in tiny_app.pair_note("teaching") and "llava-1.5-7b" in tiny_app.pair_note("teaching")
    note = tiny_app.pair_note("teaching-7b")
    assert "same answers, real speed" in note and "TABED_PRESET=llava-1.5-7b" in note
    assert "download" in tiny_app.pair_note("llava-1.5-7b")


def test_each_run_replaces_the_last_runs_downloads_named_and_titled_for_it(tiny_app, image_path):
    """A session keeps one run's downloads (the served app's soak counts the bytes over 60 runs): each run's
    file names carry its number in the session and its time, a new conversation counts on, and the chart
    page is titled with the run, what decoded and the prompt."""
    from tabed.page.downloads import downloads_root

    def folders():
        return set(downloads_root().glob("run-*"))

    before, state, names = folders(), None, []
    for handler, prompt in ((tiny_app.run, "w1 w2"), (tiny_app.ask_follow_up, "w3"), (tiny_app.run, "w4 <b>")):
        state = final(list(handler(image_path if handler is tiny_app.run else None, prompt, state,
                                   **settings(max_new_tokens=3)))).state
        files = sorted(Path(state.export_dir).iterdir())
        names.append([re.sub(r"^tabed-\d{8}-\d{6}-", "", file.name) for file in files])
        assert len(folders() - before) == 1  # the last run's only
    assert names == [[f"run{n}-report.html", f"run{n}.json"] for n in (1, 2, 3)]
    page = next(Path(state.export_dir).glob("*-report.html")).read_text()
    title = re.search(r"<title>(.*)</title>", page)[1]
    assert title.startswith("TABED demo, run 3: tabed-MT, 20") and title.endswith("“w4 &lt;b&gt;”")
    assert "<b>" not in page.split("<body")[1].split("<div")[0]  # the prompt is text, not markup
    body = page.split("<body")[1]  # the report: the verdict, both answers as tokens, the metrics, the settings
    assert 'class="tabed-verdict" data-run="3"' in body and body.count('class="tk ') >= 2
    assert '<div id="tabed-answer">' in body and '<div id="plain-answer">' in body and "<td>tokens</td>" in body
    assert "<li>drafting: tabed-MT</li>" in body and "<li>prompt: w4 &lt;b&gt;</li>" in body
    assert "<li>max_new_tokens: 3</li>" in body and "<li>repeat: 1</li>" in body and "<th>TABED</th>" in body
    assert re.search(r"tiny on cpu \(float32\); .+, \d+ cores?, \d+ torch threads?, BLAS", body)  # the machine
    assert last_run(state)["title"].endswith("“w4 <b>”")


@pytest.mark.slow
def test_a_run_on_a_busy_machine_says_its_timings_are_unreliable(tiny_app, pair, image_path, monkeypatch):
    """Other processes hogging every core: the run gets a fraction of one core, and the page says the
    speedup means nothing instead of presenting it, naming the share it got. (How a run the machine left
    alone reads is `test_the_status_and_the_metrics_say_why_this_speed`'s, with the cut-off at 0.)"""
    import os
    import subprocess
    import sys

    monkeypatch.setattr(session, "BUSY_SHARE", 0.6)  # the page's own cut-off (the tests' pages have none)
    saved = pair.target.generation_config.eos_token_id
    pair.target.generation_config.eos_token_id = [len(pair.tokenizer) + 100]  # long answers: 300 tokens
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(6 * (os.cpu_count() or 2))]
    try:
        time.sleep(0.5)
        busy = final(list(tiny_app.run(image_path, "w1 w2", None, **settings(max_new_tokens=300))))
    finally:
        for hog in hogs:
            hog.kill()
        pair.target.generation_config.eos_token_id = saved
    assert "Timings unreliable: this run got" in busy.status and "In numbers:" not in busy.status
    share = re.search(r"The run got ([\d.]+)% of one core, under the 60%", busy.status)
    assert share is not None and float(share.group(1)) < 60, busy.status
    assert busy.metrics[0][1].endswith("(busy)")  # the speedup row of the metrics, kept short
    assert "timings unreliable" in busy.metrics[1][0]


def _charted_statuses(outputs) -> list[str]:
    return [str(frame(output).status) for output in outputs if isinstance(frame(output).weights, go.Figure)]


def test_charts_wait_for_the_end_of_a_race_with_plain_decoding(tiny_app, image_path):
    """Drawing them, on the server and in a browser on the same machine, would take cores from the side
    being timed: during the race only the tokens stream; alone, TABED's charts follow its blocks."""
    outputs = list(tiny_app.run(image_path, "w1 w2", None, **settings(max_new_tokens=400)))
    raced = _charted_statuses(outputs)
    assert raced and all(status.startswith("\u2713 ") for status in raced)
    statuses = [str(frame(output).status) for output in outputs]
    decoding = [status for status in statuses if status.startswith("\u25f7") and "Finishing" not in status]
    assert decoding and all("the charts come when both sides are done" in status for status in decoding)
    # the verdict only with the charts, never over a page still blank (the frame before them says it is finishing)
    assert [status for status in statuses if status.startswith("\u2713 ")] == raced
    assert statuses[-2].startswith("\u25f7 Finishing: the metrics, charts, block table and downloads")
    alone = list(tiny_app.run(image_path, "w1 w2", None, **settings(max_new_tokens=400, compare_ar=False)))
    charted = _charted_statuses(alone)
    assert any("TABED decoding" in status for status in charted) and charted[-1].startswith("\u2713 ")
    assert not any("charts come" in str(frame(output).status) for output in alone)


@pytest.mark.parametrize("compare_ar", [True, False])
def test_a_run_starts_from_a_page_without_the_last_runs_charts_and_downloads(tiny_app, image_path, compare_ar):
    """Left there, they would sit beside the new tokens, and a download taken then would be the last run's."""
    first = final(list(tiny_app.run(image_path, "w1 w2", None, **settings(compare_ar=compare_ar))))
    assert first.downloads and isinstance(first.weights, go.Figure)
    outputs = list(tiny_app.ask_follow_up(None, "w3", first.state, **settings(compare_ar=compare_ar)))
    waiting = [frame(o) for o in outputs[:next(i for i, o in enumerate(outputs) if isinstance(frame(o).tabed, dict)
                                                 and frame(o).tabed.get("label"))]]
    assert all(changed(f) == ["status"] for f in waiting)  # before the engine takes it, only the status
    out = frame(outputs[len(waiting)])
    assert "TABED decoding" in out.status and out.plain == "" and out.tabed["label"] == "Answer (TABED)"
    assert (out.metrics, out.weights, out.blocks, out.downloads, out.trees) == (None, None, None, None, None)
    assert final(outputs).downloads and Path(final(outputs).downloads[0]).exists()


def changed(page: Frame) -> list[str]:
    """The outputs a frame changes (the others are skipped)."""
    return [name for name in OUTPUTS if getattr(page, name) != gr.skip()]


def _text_named_png(tmp_path) -> dict:
    """A text file renamed `.png`, as the gallery sends it."""
    path = tmp_path / "notes.png"
    path.write_text("a shopping list, not a picture\n" * 8)
    return {"image": {"path": str(path), "orig_name": "notes.png"}, "caption": None}


# Every bad value a visitor can type or an API client can send (issue 74), and the line the status gives.
BAD_INPUTS = [
    ({"prompt": "w1 " * 1100}, "the prompt is"),  # refused by the engine: it fills the context
    ({"seed": 10**20}, "seed must be a whole number from 0 to 4294967295; got 100000000000000000000"),
    ({"seed": -3}, "seed must be a whole number from 0 to 4294967295; got -3"),
    ({"window": -5}, "history window must be a whole number from 0 to 100000 (0 keeps every position); got -5"),
    ({"gamma": 0}, "γ (draft tokens per block) must be a whole number from 1 to 20; got 0"),
    ({"gamma": 21}, "γ (draft tokens per block) must be a whole number from 1 to 20; got 21"),
    ({"max_new_tokens": 0}, "max new tokens must be a whole number from 1 to 1024; got 0"),
    ({"max_new_tokens": 99999}, "max new tokens must be a whole number from 1 to 1024; got 99999"),
    ({"temperature": 2.5}, "temperature must be a number from 0 to 2 (0 is greedy); got 2.5"),
    ({"top_p": 0}, "top-p must be a number above 0 and at most 1 (1 keeps every token); got 0"),
    ({"tree_width": 5}, "tree width must be a whole number from 1 to 4 (1 drafts a chain); got 5"),
    ({"preset": "gpt-5"}, "model pair must be one of teaching"),
    ({"methods": ["M", "X"]}, "drafting methods are M, T, C, P, N; 'X' is not one"),
    ({"pictures": "text"}, "cannot read image notes.png"),
    ({"pictures": "nine"}, "pictures: at most 8 at once; got 9"),
]


@pytest.mark.parametrize("bad, said", BAD_INPUTS, ids=[f"{next(iter(b))}{i}" for i, (b, _) in enumerate(BAD_INPUTS)])
def test_a_refused_request_changes_nothing_but_the_status(tiny_app, image_path, tmp_path, caplog, capfd, bad, said):
    """Each bad input, to a new run and to a follow-up: one line naming the field, what was wrong and what is
    accepted; the last run's answer, charts, tables, downloads and conversation stay as they were (every frame
    changes the status alone), no decoding starts, and nothing is logged as an error or a traceback."""
    first = final(list(tiny_app.run(image_path, "w1 w2", None, **settings())))
    assert first.downloads and first.state.turns
    pictures = {"text": [_text_named_png(tmp_path)], "nine": [(image_path, None)] * 9}.get(bad.get("pictures"))
    inputs = settings(**{"prompt": "w3", **bad, "pictures": pictures})
    for handler in (tiny_app.run, tiny_app.ask_follow_up):
        outputs = [frame(o) for o in handler(conversation=first.state, **inputs)]
        assert all(changed(out) == ["status"] for out in outputs), [changed(out) for out in outputs]
        status = outputs[-1].status
        assert status.startswith("\u26a0\ufe0f Error: ") and said in status and "\n" not in status, status
        assert not any("decoding" in out.status for out in outputs) and len(first.state.turns) == 1
    assert not [record for record in caplog.records if record.levelname in ("ERROR", "CRITICAL")]
    assert "Traceback" not in capfd.readouterr().err  # the server logs no traceback


def test_a_new_conversation_leaves_nothing_of_the_last_run_on_the_page(tiny_app, image_path):
    first = final(list(tiny_app.run(image_path, "w1 w2", None, **settings())))
    assert first.downloads and isinstance(first.weights, go.Figure)
    folder = Path(first.state.export_dir)
    assert folder.is_dir()
    *values, race, pictures, prompt = tiny_app.new_conversation(first.state)
    assert not folder.exists()  # its files too
    page = frame(values)
    assert not page.state.turns and page.chat == [] and (page.tabed, page.plain, race) == ("", "", "")
    assert (pictures, prompt) == (None, "")  # the next conversation picks its own
    assert "new conversation" in page.status
    assert [page.metrics, page.weights, page.blocks, page.downloads, page.trees] == [None] * 5
    second = final(list(tiny_app.run(image_path, "w3", page.state, **settings())))
    assert second.status.startswith("\u2713 ")
    assert 'data-run="2"' in second.html_status  # the session's runs count on: no second "run 1"


def test_a_follow_up_with_no_conversation_says_so(tiny_app, image_path):
    """Through the API with no session state (or on a fresh page) there is nothing to follow up: one line,
    instead of silently answering as a first turn."""
    out = final(list(tiny_app.ask_follow_up(image_path, "w3", None, **settings())))
    assert out.status.startswith("\u26a0\ufe0f Error: there is no answer to follow up") and changed(out) == ["status"]


def test_before_any_run_the_block_table_has_its_real_columns():
    table = next(block for block in app.demo.blocks.values() if getattr(block, "elem_id", None) == "blocks")
    assert table.headers[:3] == ["block", "weights", "ensemble draft"] and "M guesses" in table.headers


def test_the_block_stepper_shows_the_last_answers_blocks_one_at_a_time(tiny_app, image_path):
    """The page inspects every block; the stepper shows one at a time, by number (clamped), or by the row of
    the block table picked; the download holds what each block decided."""
    state = final(list(tiny_app.run(image_path, "w1 w2 w3", None, **settings(max_new_tokens=40)))).state
    blocks = state.last.blocks
    assert len(blocks) > 2 and all(len(b.positions) == min(b.accepted + 1, len(b.draft)) for b in blocks)
    assert last_run(state)["results"]["speculative"]["blocks"][1]["positions"]  # in the download too
    index, page = tiny_app.show_step(state, 1)
    assert index == 1 and f"Block 1 of blocks 0–{len(blocks) - 1}" in page and "\u26a0" not in page
    last = len(blocks) - 1
    for typed, shown, said in ((999, last, f"block 999 is not one of this answer's blocks (0 to {last}): showing "
                                           f"block {last}"),
                               (-3, 0, f"block -3 is not one of this answer's blocks (0 to {last}): showing block 0"),
                               (2.5, 0, "block must be a whole number, one of this answer's blocks; got 2.5")):
        index, page = tiny_app.show_step(state, typed)  # the nearest block, and the stepper says why above it
        said = f'<p class="tabed-step-refused">\u26a0\ufe0f {said}</p>'
        assert index == shown and html.unescape(page).startswith(said)
        assert f"Block {shown} of blocks 0–{last}" in page
    assert tiny_app.show_step(state, None)[:1] == (0,) and "\u26a0" not in tiny_app.show_step(state, last)[1]
    assert tiny_app.pick_step(state, SimpleNamespace(index=[2, 4]))[0] == 2  # a tap on the table's third row
    assert "Run a prompt" in tiny_app.show_step(None, 3)[1]
    # a number typed in the box is left there (one typed while this step was on its way stays for the next),
    # one that is no block is put right
    assert tiny_app.typed_step(state, 2)[0] == gr.skip()
    assert tiny_app.typed_step(state, 999)[0] == last and tiny_app.typed_step(state, None)[0] == 0
    assert tiny_app.typed_step(state, 2)[1] == tiny_app.show_step(state, 2)[1]
    assert "one row" not in tiny_app.show_step(state, 1)[1]
    unseen = final(list(tiny_app.run(None, "w1 w2 w3", None, **settings(max_new_tokens=40)))).state  # no picture
    assert "one row, the chart&#x27;s line M=T 1.00, split equally here" in tiny_app.show_step(unseen, 1)[1]


def test_the_status_shows_lossless_and_names_what_decoded(tiny_app, image_path, monkeypatch):
    """Greedy: identical to plain decoding, token for token; sampling: a sample of the same distribution;
    a static ensemble or a single method is never called TABED."""
    monkeypatch.setattr(session, "BUSY_SHARE", 0.0)  # the verdict's figure, whatever else the machine runs
    greedy = final(list(tiny_app.run(image_path, "w1 w2 w3", None, **settings(max_new_tokens=30))))
    tokens = len(last_run(greedy.state)["results"]["autoregressive"]["token_ids"])
    assert f"Identical to plain decoding: {tokens} of {tokens} tokens. Exact means the target's own answer, not a " \
           "true one" in greedy.status  # a student must not read "exact" as "right"
    verdict = greedy.status.splitlines()[0]  # the first line says it, with the cause of the speed
    checks = last_run(greedy.state)["results"]["speculative"]["metrics"]["target_forwards"] - 1  # after the prompt's
    assert re.fullmatch(rf"\u2713 TABED ran .*; its answer is identical, {tokens} of {tokens} tokens; each check by "
                        rf"the big model produced {(tokens - 1) / checks:.2f} tokens\.", verdict), verdict
    sampled = final(list(tiny_app.run(image_path, "w1 w2 w3", None, **settings(temperature=1.0, seed=3))))
    assert "its answer is a sample of the same distribution as plain decoding's" in sampled.status.splitlines()[0]
    assert "from the same distribution" in sampled.status and "min(1, p(x)/q(x))" in sampled.status
    assert "kept when a uniform draw u from 0 to 1 is below p/q" in sampled.status  # the u each token's test gives
    assert "The conversation goes on from TABED's sample." in sampled.status  # of the two shown, the one it keeps
    assert "One pair of answers cannot show a distribution" in sampled.status  # and how a student checks it
    assert "at temperature 0 the same steps give the target's own answer, identical token for token" in sampled.status
    assert sampled.state.turns[-1][1] == last_run(sampled.state)["results"]["speculative"]["text"]
    for methods, mode, name in ((["M"], MODES[2], "M alone"), (["M", "T"], MODES[1], "static ensemble MT")):
        statuses = [frame(values).status for values in tiny_app.run(image_path, "w1 w2", None,
                                                                     **settings(methods=methods, mode=mode))]
        assert any(f"{name} decoding" in status for status in statuses if status)
        assert not any("TABED" in status for status in statuses if status), statuses
        outputs = list(tiny_app.run(image_path, "w1 w2", None, **settings(methods=methods, mode=mode)))
        label = name.removeprefix("the ")
        assert frame(outputs[0]).tabed["label"] == f"Answer ({label})" and final(outputs).header[1] == label
        race = list(app.race_frames(final(outputs).state, threading.Event()))[-1]
        assert label in race and "TABED" not in race


def test_an_answer_too_short_to_time_shows_no_speedup(tiny_app, image_path):
    out = final(list(tiny_app.run(image_path, "w1 w2", None, **settings(max_new_tokens=1))))
    assert "too short to time" in out.status and "×" not in out.status
    assert out.metrics[0][1].startswith("too short to time")


def result(ids: list[int], stopped: bool = False, share: float = 1.0):
    """A finished side of a run with these tokens (its metrics hand-made; starved below a 0.6 CPU share)."""
    from tabed.engine.events import GenerationResult, Metrics

    metrics = Metrics(len(ids), 0.1, 0.5, 0.6, 1.0, len(ids), 1.0, cpu_share=share, busy=share < 0.6)
    return GenerationResult("x", None, ids, "", metrics, stopped=stopped)


def test_an_answer_that_differs_says_why_only_as_its_precision_allows(tiny_app, pair):
    from tabed.page.controls import MODES, page_settings
    from tabed.page.render import TokenStream
    from tabed.page.view import RunView

    for dtype, said in ((torch.float32, "unexpected in float32"), (torch.float16, "half precision rounds"),
                        (torch.bfloat16, "half precision rounds")):
        view = RunView(replace(pair, dtype=dtype), page_settings(["M", "T"], MODES[0]), TokenStream(pair.tokenizer),
                       TokenStream(pair.tokenizer))
        view.results = {"speculative": result([1, 2, 3, 4]), "autoregressive": result([1, 2, 5, 4])}
        assert view.lossless().startswith(f"Differs from plain decoding from token 3 on: {said}")


def test_the_zerogpu_budget_counts_every_run_a_request_makes():
    """Plain decoding and TABED, and each method alone when asked: 30 s and a quarter second a token a run,
    at most 300 s."""
    from tabed.page.request import Request

    def seconds(**inputs):
        return app._gpu_seconds(False, Request(**inputs))

    assert seconds(methods=["M", "T"], max_new_tokens=100) == 30 + 0.25 * 2 * 100
    assert seconds(methods=["M", "T"], methods_alone=True, max_new_tokens=100) == 30 + 0.25 * 4 * 100
    assert seconds(methods=["M", "T", "C"], methods_alone=True, max_new_tokens=40) == 30 + 0.25 * 5 * 40
    assert seconds(methods=["M", "T"], methods_alone=True, max_new_tokens=4096) == 300
    assert app._gpu_seconds(True, Request(max_new_tokens="x")) == 30 + 0.25 * 2 * app.PAGE.max_new_tokens


def test_each_session_words_its_own_answer_with_its_own_pairs_tokenizer(pair, image_path):
    """Two sessions on two pairs whose tokenizers differ ('w…' and 'v…' words), interleaved in one process that
    holds one pair at a time: each session's stepper words its own answer's blocks, and a follow-up keeps its
    conversation's pair."""
    from conftest import SIZE, make_pair, perturbed, sharpen, word_tokenizer
    from tabed.models.factory import llava_processor, random_llava

    tokenizer = word_tokenizer([f"v{i}" for i in range(40)])
    target = sharpen(random_llava(SIZE, tokenizer, seed=5), seed=5)
    other = make_pair(target, perturbed(target, noise=0.004), llava_processor(tokenizer, SIZE.image_size,
                                                                              SIZE.patch_size), "other")
    with serving(pair):
        first = final(list(app.run(image_path, "w1 w2 w3", None, **settings(compare_ar=False))))
    with serving(other):
        second = final(list(app.run(image_path, "v1 v2 v3", None, **settings(compare_ar=False))))
        for state, word in ((first.state, "w"), (second.state, "v")):
            _, page = app.show_step(state, 1)
            drafted = re.findall(r"\b[wv]\d+\b", html.unescape(re.sub(r"<[^>]+>", " ", page)))
            assert drafted and {token[0] for token in drafted} == {word}, page
        refused = final(list(app.ask_follow_up(None, "w4", first.state, **settings(preset="teaching-7b"))))
        assert "a follow-up continues with the conversation's model pair ('teaching')" in refused.status


def test_a_sampled_answer_says_whether_its_sample_is_plain_decodings(pair):
    from tabed.page.controls import MODES, page_settings
    from tabed.page.render import TokenStream
    from tabed.page.view import RunView

    view = RunView(pair, page_settings(["M", "T"], MODES[0], temperature=1.0), TokenStream(pair.tokenizer),
                   TokenStream(pair.tokenizer))
    for ids, said in (([1, 2, 3, 4], "the same sample"), ([1, 2, 5, 4], "a different sample")):
        view.results = {"speculative": result([1, 2, 3, 4]), "autoregressive": result(ids)}
        assert view.lossless().startswith(f"Sampling: {said} from the same distribution.")


def test_the_status_counts_each_sides_own_tokens_and_the_most_starved_share(pair):
    """Plain decoding's progress and its Stop count plain decoding's tokens (not TABED's), and a Stop that landed
    before plain decoding began says so (not "done"); a run whose two sides were starved is said to have got the
    smaller share."""
    from tabed.page.controls import MODES, page_settings
    from tabed.page.render import TokenStream
    from tabed.page.view import RunView

    view = RunView(pair, page_settings(["M", "T"], MODES[0]), TokenStream(pair.tokenizer), TokenStream(pair.tokenizer),
                   started=True, phase="autoregressive")
    view.tabed.ids, view.plain.ids = [1, 2, 3, 4, 5], [1, 2]
    assert "plain decoding (the target alone)… token 2 ·" in status_text(view.status(False))
    view.results = {"speculative": result([1, 2, 3, 4, 5]), "autoregressive": result([1, 2], stopped=True)}
    assert status_text(view.status(True)).startswith("\u25a0 Stopped plain decoding after 2 tokens")
    view.results, view.racing = {"speculative": result([1, 2, 3, 4, 5])}, True  # stopped as TABED's answer ended
    assert status_text(view.status(True)).startswith("\u25a0 Stopped before plain decoding began · ")
    assert view.stopped() == "autoregressive" and not view.compared()
    view.racing = False  # plain decoding not asked for: nothing was stopped
    assert view.stopped() is None and status_text(view.status(True)).startswith("\u2713 TABED is done")
    view.results = {"speculative": result([1, 2, 3], share=0.5), "autoregressive": result([1, 2, 3], share=0.2)}
    assert view.starved() == 0.2


def test_methods_that_read_the_same_text_are_drawn_and_explained_as_one_row(tiny_app):
    """No picture: M and T are one row, so the chart draws one line at weight 1, the block table one column,
    and the stepper says why their weights never move; with a picture each has its own."""
    out = final(list(tiny_app.run(None, "w7 w8", None, **settings(max_new_tokens=30))))
    lines = {trace.name: list(trace.y) for trace in out.weights.data if trace.type == "scatter"}
    assert lines == {"weight of M=T (one row: no picture)": [1.0] * len(out.state.last.blocks)}
    assert "M=T guesses" in out.blocks.headers and "M guesses" not in out.blocks.headers
    assert "no picture" in out.status
    _, page = tiny_app.show_step(out.state, 2)
    assert "read the same text (no picture)" in page and "nothing verified yet" not in page


def test_two_samples_of_different_lengths_compare_per_token_and_say_why(tiny_app, image_path, monkeypatch):
    """Sampling, the two answers are two samples, often of different lengths: the speedup is plain decoding's
    time for as many tokens over ours (per decode step), says so, and the why follows it as for greedy."""
    monkeypatch.setattr(session, "BUSY_SHARE", 0.0)
    for seed in range(20):
        out = final(list(tiny_app.run(image_path, "w1 w2 w3", None, **settings(temperature=1.0, seed=seed,
                                                                              max_new_tokens=60))))
        tokens = re.search(r"per token: the two samples are (\d+) and (\d+) tokens long", out.status)
        if tokens:
            break
    assert tokens and tokens[1] != tokens[2], out.status
    speedup = float(re.search(r"The speedup, ([\d.]+)×, is plain decoding's decode time over this run's per token",
                              out.status)[1])
    rows = {row[0]: row[1] for row in out.metrics}
    decode = next([float(row[1]), float(row[2])] for row in out.metrics if row[0] == "decode time (s)")
    per_step = decode[1] / (int(tokens[2]) - 1) * (int(tokens[1]) - 1) / decode[0]
    assert speedup == pytest.approx(per_step, abs=0.02)
    assert rows["speedup (decode time per token: samples of two lengths)"] == f"{speedup:.2f}×"
    assert "In numbers: " in out.status and render.PREDICTED in rows  # the why, for samples too


def test_the_status_and_the_metrics_say_why_this_speed(tiny_app, image_path, monkeypatch):
    """Tokens per target pass over what a pass and its drafting cost in plain steps: the speedup that
    predicts, beside the one measured, in the status and in the metrics (whose figures give it back). The
    run's timings are taken as trusted whatever else the machine runs (no share of a core is under 0)."""
    monkeypatch.setattr(session, "BUSY_SHARE", 0.0)
    out = final(list(tiny_app.run(image_path, "w1 w2 w3", None, **settings(max_new_tokens=40))))
    speedup = re.search(r"The speedup, ([\d.]+)×", out.status)[1]
    assert re.search(rf"In numbers: [\d.]+ tokens per target pass; .* expected [\d.]+×; the weights and bookkeeping "
                     rf"took [\d.]+ more a pass: measured {speedup}×\.", out.status), out.status
    rows = {row[0]: row[1] for row in out.metrics}
    per_pass = float(rows[render.PER_PASS])
    verify, drafting = float(rows["a verify's cost (plain steps)"]), float(rows[render.DRAFTING])
    predicted = rows[render.PREDICTED]
    assert float(predicted.split("×")[0]) == pytest.approx(per_pass / (verify + drafting), abs=0.02)
    assert f"(measured {speedup}×)" in predicted
    other = float(rows["other per pass: weights, bookkeeping (plain steps)"])  # the gap, named: the whole is measured
    assert float(rows[render.WHOLE].split("×")[0]) == pytest.approx(float(speedup), abs=0.011)
    assert float(rows[render.WHOLE].split("×")[0]) == pytest.approx(per_pass / (verify + drafting + other), abs=0.03)
    names = [row[0] for row in out.metrics]
    assert names.index("speedup (decode time)") < names.index("a verify's cost (plain steps)") < names.index("tokens")
    short = final(list(tiny_app.run(image_path, "w1 w2", None, **settings(max_new_tokens=3))))
    assert "In numbers:" not in short.status
    assert "a verify's cost (plain steps)" not in [row[0] for row in short.metrics]


def test_each_method_run_alone_shows_its_real_figures_beside_the_ensembles(tiny_app, pair, image_path):
    """'then run each method alone': after plain decoding each ticked method drafts alone with the same settings;
    its real block efficiency (what the engine gives for that method alone) joins the metrics, and its tokens
    touch neither answer, the block table nor the race; a single method is not run twice."""
    from tabed.engine.config import GenerationConfig
    from tabed.engine.loop import collect, speculative_generate
    from tabed.engine.spec import parse_spec
    from tabed.models.chat import Turn

    chosen = settings(max_new_tokens=40, methods_alone=True)
    out = final(list(tiny_app.run(image_path, "w1 w2 w3", None, **chosen)))
    saved = last_run(out.state)["results"]
    assert set(saved) == {"speculative", "autoregressive", "alone:M", "alone:T"}
    rows = {row[0]: row[1] for row in out.metrics}
    image = Image.open(image_path)
    for method in ("M", "T"):
        config = GenerationConfig(max_new_tokens=40, gamma=5, inspect=True)
        alone = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec(method), config))
        shown = rows[f"{method} alone, really run: block efficiency · speedup (decode time)"]
        assert shown.startswith(f"{alone.metrics.block_efficiency:.2f} · ") and shown.endswith("× plain decoding")
        assert saved[f"alone:{method}"]["token_ids"] == saved["autoregressive"]["token_ids"]
    assert len(out.blocks.value["data"]) == saved["speculative"]["metrics"]["target_forwards"]
    assert out.plain.count("tk-plain") == len(saved["autoregressive"]["token_ids"])
    assert set(out.state.last.frames) == {"speculative", "autoregressive"}
    single = final(list(tiny_app.run(image_path, "w1 w2", None, **settings(methods=["M"], mode=MODES[2],
                                                                            methods_alone=True))))
    assert set(last_run(single.state)["results"]) == {"speculative", "autoregressive"}
    unraced = final(list(tiny_app.run(image_path, "w1 w2", None, **settings(compare_ar=False, methods=["M", "T", "N"],
                                                                             methods_alone=True))))
    shown = {row[0]: row[1] for row in unraced.metrics}  # N never drafts alone; no plain decoding: no speedup
    assert set(last_run(unraced.state)["results"]) == {"speculative", "alone:M", "alone:T"}
    assert "×" not in shown["M alone, really run: block efficiency · speedup (decode time)"]
    assert unraced.status.startswith("\u2713 ")


def test_a_closed_sessions_downloads_go_with_its_state(tiny_app, image_path):
    """Gradio deletes a session's state an hour after its browser tab closed: the state's files go too."""
    out = final(list(tiny_app.run(image_path, "w1 w2", None, **settings())))
    folder = Path(out.state.export_dir)
    state = next(block for block in app.demo.blocks.values() if isinstance(block, gr.State))
    state.delete_callback(out.state)
    assert not folder.exists() and out.state.export_dir is None


def test_an_answer_holding_none_of_the_questions_words_is_said_to_maybe_be_about_something_else(tiny_app,
                                                                                                 image_path):
    """The teaching target answers a question worded unlike its world's about something else: the page says so
    when the answer holds none of the question's words (and not when it holds one)."""
    status = final(list(tiny_app.run(image_path, "Where is the zebra?", None, **settings()))).status
    assert ("None of your question's words (zebra) is in it: the teaching target, taught a few "
            "kinds of question, may have answered one of those instead. It is still the target's own answer") in status
    out = final(list(tiny_app.run(image_path, " ".join(f"w{i}" for i in range(10, 40)), None, **settings())))
    assert re.search(r"\bw[1-3]\d\b", out.chat[-1]["content"])  # the answer holds one of the question's words
    assert "- The answer:" not in out.status


def test_the_settings_controls_are_the_requests_inputs_in_the_pages_words():
    """Each control is one of `Request`'s inputs: its label from the page's own table (never a name from the
    code), its value the request's default; the handlers take those inputs by name, in the API's order."""
    import inspect

    from tabed.page.controls import LABELS
    from tabed.page.request import INPUTS, Request

    with app.gr.Blocks():
        controls = app.settings_accordion("teaching", app.PAGE)
    defaults = Request()
    for name, control in controls.items():
        assert control.label == LABELS[name], name
        value = control.value
        expected = getattr(defaults, name) if name != "preset" else "teaching"
        assert (list(value) if isinstance(value, (list, tuple)) else value) == \
            (list(expected) if isinstance(expected, (list, tuple)) else expected), name
    assert set(controls) | {"pictures", "prompt", "conversation"} == set(INPUTS)
    assert controls["methods"].label == "Drafting methods"
    for handler in (app.run, app.ask_follow_up):
        assert list(inspect.signature(handler).parameters) == [*INPUTS, "request"]
        assert all(f"    {name}: " in handler.__doc__ for name in INPUTS)


@pytest.mark.slow
def test_the_page_says_why_on_the_bundled_examples(teaching_pair, monkeypatch, tmp_path):
    """What a student must answer from the page, on the bundled pair: on the odd pictures T led and M missed
    because the drafter reads these pictures differently; on a made-up country how often each method's guesses
    were the target's and that only the target was taught its facts; with no picture the rows were one; on a
    second turn what its context holds; each answer why it was fast or slow. What an example was built to
    show is said when its pictures (by content: a copy under another name too) and its prompts are asked."""
    monkeypatch.setattr(session, "BUSY_SHARE", 0.0)  # the reasons, whatever else the machine runs
    odd = [str(app.EXAMPLES / name) for name in ("noise.png", "inverted.png", "texture.png")]
    shapes = tmp_path / "my-upload.png"
    shapes.write_bytes((app.EXAMPLES / "shapes.png").read_bytes())
    with serving(teaching_pair) as served:
        def ask(pictures, prompt: str, state=None) -> Frame:
            handler = served.run if state is None else served.ask_follow_up
            return final(list(handler(pictures, prompt, state, **settings(max_new_tokens=96))))

        first = ask(odd, "Describe the image in detail.")
        said = first.status
        assert re.search(r"T led: its guesses matched at \d+% of the positions it guessed at, M's at \d+%, and the "
                         r"weights followed it", said), said
        assert re.search(r"only T at \d+ \(there M.s reading of the picture led it astray: “[^”]*<b>[^”]+</b>[^”]*” "
                         r"\(M guessed '[^']+'\)", first.html_status), said  # the words M misread, quoted
        assert "This example was built to show odd pictures (noise, shapes in inverted colours, a texture)" in said
        second = ask(None, "What is 17 plus 25?", first.state).status
        assert "This example was built to show a second turn: the drafter, taught mostly on first turns" in second
        made_up = ask([str(shapes)], "Tell me about Moravia.").status  # the drafter knows the
        assert re.search(r"M's at \d+ of \d+ positions", made_up), made_up  # grammar: it says what it observed
        assert "a made-up fact: Moravia is a country the teaching world invented and only the target" in made_up
        own = ask([str(shapes)], "Tell me about Moravia and its capital.").status  # not an example's question
        assert "This example was built" not in own
        assert "This is a question of your own, so the page says only what it measured" in own
        assert "- The answer:" not in own + made_up  # it is about Moravia; an example's answer is the expected one
        elsewhere = ask([str(shapes)], "What animal is in the picture?").status  # the target describes the shapes
        assert "None of your question's words (animal) is in it: the teaching target" in elsewhere
        plain = ask(None, "What is 47 plus 38?").status
        assert "M and T read the same text (no picture): one row" in plain
        assert "This example was built to show arithmetic worked step by step" in plain
        for text in (said, second, made_up, plain):
            assert re.search(r"(Fast because|Slower than plain decoding:|About as fast as plain decoding \(.*\):) each "
                             r"target pass produced", text), text


def test_a_runs_view_says_each_of_its_reasons_only_where_it_holds(pair):
    """M and T drafted as one row weigh nothing only when they are every method; a method alone that was
    stopped has no speedup; what each method sees is said only with a picture; a side not yet run reads '…'
    while the race runs and 'not run' when there is no race."""
    from tabed.page import stepper
    from tabed.page.controls import MODES, page_settings
    from tabed.page.render import TokenStream
    from tabed.page.view import RunView

    def view(methods, **fields):
        return RunView(pair, page_settings(methods, MODES[0]), TokenStream(pair.tokenizer),
                       TokenStream(pair.tokenizer), started=True, **fields)

    assert "nothing to weigh" in view(["M", "T"], shared=["M", "T"]).unlearned()
    assert view(["M", "T", "N"], shared=["M", "T"]).unlearned() == stepper.UNLEARNED
    both = {"speculative": result(list(range(10))), "autoregressive": result(list(range(10)))}
    alone = {"M": result(list(range(10))), "T": result(list(range(10)), stopped=True)}
    seen = view(["M", "T"], results=both, alone=alone)
    assert set(seen.alone_speedups()) == {"M"}
    assert "What each method sees" not in status_text(seen.status(True))
    seen.pictures = True
    assert "What each method sees" in status_text(seen.status(True))
    for racing, missing in ((True, "…"), (False, "not run")):
        rows = view(["M", "T"], racing=racing, results={"speculative": both["speculative"]}).metrics().value
        assert [missing] == [row[2] for row in rows["data"] if row[0] == "tokens"]


def test_a_method_alone_has_one_speedup_in_the_status_and_the_metrics(pair):
    """The status's 'Each method alone' and the metrics' row give the same figure: plain decoding's time for
    as many tokens over the method's (an answer of another length compares per token)."""
    from tabed.engine.events import GenerationResult, Metrics
    from tabed.page.controls import MODES, page_settings
    from tabed.page.render import TokenStream
    from tabed.page.view import RunView

    def side(tokens: int, decode_s: float) -> GenerationResult:
        metrics = Metrics(tokens, 0.1, decode_s, decode_s + 0.1, 1.0, tokens, 1.0, cpu_share=1.0)
        return GenerationResult("x", None, list(range(tokens)), "", metrics)

    view = RunView(pair, page_settings(["M", "T"], MODES[0]), TokenStream(pair.tokenizer),
                   TokenStream(pair.tokenizer), started=True,
                   results={"speculative": side(11, 0.5), "autoregressive": side(11, 1.0)},
                   alone={"M": side(21, 0.8)})
    assert view.alone_speedups() == {"M": pytest.approx(2.5)}  # 1 s for 10 steps against 0.8 s for 20
    rows = {row[0]: row[1] for row in view.metrics().value["data"]}
    assert rows["M alone, really run: block efficiency · speedup (decode time)"].endswith("2.50× plain decoding")
    assert "M 2.50× plain decoding, against TABED's 2.00×" in status_text(view.status(True))


def test_no_race_note_when_the_run_was_not_raced(tiny_app, image_path):
    out = final(list(tiny_app.run(image_path, "w1 w2", None, **settings(compare_ar=False, max_new_tokens=8))))
    assert out.state.last.race_note == ""
    out = final(list(tiny_app.run(image_path, "w1 w2", None, **settings(max_new_tokens=12))))
    assert out.state.last.race_note == ""


def test_the_status_shows_every_text_as_written(pair):
    """The status is HTML: the C row's '<caption>' and a note's markup read as written, never as a tag."""
    from tabed.page.controls import MODES, page_settings
    from tabed.page.render import TokenStream
    from tabed.page.view import RunView

    view = RunView(pair, page_settings(["M", "T", "C"], MODES[0]), TokenStream(pair.tokenizer),
                   TokenStream(pair.tokenizer), started=True, pictures=True, notes=["<b>seed</b> was empty: 0"],
                   results={"speculative": result(list(range(10))), "autoregressive": result(list(range(10)))})
    page = view.status(True)
    assert "caption (image replaced by 'image: &lt;caption&gt;')" in page and "<caption>" not in page
    assert "&lt;b&gt;seed&lt;/b&gt; was empty" in page and "<b>seed</b>" not in page and "**" not in page
    assert "caption (image replaced by 'image: <caption>')" in status_text(page)


def test_a_starved_run_headlines_no_speedup(pair):
    """A run whose sides got under the busy share of a core (as the engine's clock found it) says its timings
    are unreliable in the verdict, with no figure there; the figure its clock read stays in the fold, marked."""
    from tabed.page.controls import MODES, page_settings
    from tabed.page.render import TokenStream
    from tabed.page.view import RunView

    ids = list(range(12))
    view = RunView(pair, page_settings(["M", "T"], MODES[0]), TokenStream(pair.tokenizer),
                   TokenStream(pair.tokenizer), started=True,
                   results={"speculative": result(ids, share=0.3), "autoregressive": result(ids)})
    first, *rest = status_text(view.status(True)).splitlines()
    assert "timings are unreliable" in first and "×" not in first and "identical, 12 of 12 tokens" in first
    assert any(line.startswith("- \u26a0\ufe0f Timings unreliable: this run got 30% of one core") for line in rest)
    assert any("a figure of the machine's load, not the method's" in line for line in rest)


def test_what_a_user_typed_shows_as_typed_in_the_conversation(tiny_app, image_path):
    out = final(list(tiny_app.run(image_path, "<b>w1</b> w2\nw3", None, **settings(max_new_tokens=8))))
    assert out.chat[0]["content"] == "[1 picture] &lt;b&gt;w1&lt;/b&gt; w2<br>w3"
    assert "<" not in out.chat[1]["content"].replace("<br>", "")
