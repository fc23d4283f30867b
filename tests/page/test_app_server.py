"""The launched app through gradio_client: a run completes, a cancelled run stops, two runs queue."""

import time
from pathlib import Path

import pytest
from gradio_client import Client, handle_file

import app
from conftest import serving, status_text, workers_alive
from tabed.page.controls import MODES
from tabed.page.view import OUTPUTS

SETTINGS = dict(preset="teaching", methods=["M", "T"], mode=MODES[0], rule="w-grid", window=0, gamma=5,
                temperature=0.0, seed=0, compare_ar=True)
SHOWN = [name for name in OUTPUTS if name != "state"]  # what a client receives (the session state stays)


def named(values) -> dict:
    """A client's result by output name."""
    out = dict(zip(SHOWN, values, strict=True))
    return out | {"status": status_text(out["status"])}  # its words


@pytest.fixture(scope="module")
def server(pair):
    with serving(pair):
        _, url, _ = app.demo.launch(prevent_thread_lock=True, quiet=True, server_port=None)
        yield Client(url, verbose=False)
        app.demo.close()


@pytest.fixture(scope="module")
def picture(tmp_path_factory, image):
    path = tmp_path_factory.mktemp("pictures") / "picture.png"
    image.save(path)
    return [{"image": handle_file(str(path)), "caption": None}]  # the gallery's value: one picture


def submit(client, picture, prompt, max_new_tokens=24):
    return client.submit(pictures=picture, prompt=prompt, max_new_tokens=max_new_tokens, **SETTINGS, api_name="/run")


def wait_until(condition, seconds):
    """Poll `condition` until it holds or `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_run_completes_with_both_answers_and_downloads(server, picture):
    out = named(submit(server, picture, "w1 w2").result(60))
    assert out["status"].startswith("\u2713 ")
    assert "tk-accepted" in out["tabed"] and "tk-plain" in out["plain"]
    metrics = out["metrics"]["value"]  # a table with its headers, which name what decoded
    assert any(row[0].startswith("block efficiency") for row in metrics["data"]) and metrics["headers"][1] == "TABED"
    assert out["weights"]["type"] == "plotly"
    assert out["chat"][0]["role"] == "user"
    assert len(out["downloads"]) == 2  # the run, and one page of its weights and the hedged first block's tree
    assert Path(out["downloads"][1]).read_text().count('class="plotly-graph-div"') == 2
    assert out["trees"]["type"] == "plotly"


def test_a_cancelled_run_stops_its_worker(server, picture):
    job = submit(server, picture, "w3 w4", max_new_tokens=400)
    wait_until(lambda: any(named(output)["tabed"] for output in job.outputs()), 30)
    assert workers_alive() == 1
    job.cancel()
    wait_until(lambda: not workers_alive(), 30)  # well under a second when quiet; generous for a busy CI
    assert workers_alive() == 0


def test_two_sessions_at_once_both_complete_without_mixing(pair, server, picture):
    other = Client(server.src, verbose=False)  # made first: a client takes a while to start
    first = submit(server, picture, "w5 w6", max_new_tokens=200)
    # the second is sent once the first runs, so it must queue behind it
    wait_until(lambda: first.status().code.name in ("PROCESSING", "ITERATING", "FINISHED"), 30)
    second = submit(other, None, "w7 w8 w9", max_new_tokens=200)
    codes, most_workers = set(), 0
    while not second.done():
        codes.add(second.status().code.name)
        most_workers = max(most_workers, workers_alive())
        time.sleep(0.01)
    results = named(first.result(60)), named(second.result(60))
    assert "IN_QUEUE" in codes  # the second waited its turn (Gradio shows its position)
    assert most_workers == 1  # one decode at a time: the timings are never shared
    assert [r["status"].startswith("\u2713 ") for r in results] == [True, True]
    assert results[0]["chat"][0]["content"][0]["text"].endswith("w5 w6")
    assert results[1]["chat"][0]["content"][0]["text"] == "w7 w8 w9"


def test_the_api_takes_named_inputs_and_answers_without_server_paths(server, tmp_path):
    """As the README shows it: named inputs, the others at the page's defaults."""
    parameters = server.view_api(return_format="dict", print_info=False)["named_endpoints"]["/run"]["parameters"]
    names = [p["parameter_name"] for p in parameters]
    assert names == ["pictures", "prompt", "preset", "methods", "mode", "rule", "window", "gamma",
                     "max_new_tokens", "temperature", "seed", "compare_ar", "adaptive", "tree_width", "tree_policy",
                     "tree_blocks", "hedge_first", "methods_alone", "repeat", "top_p"]
    types = {p["parameter_name"]: p["type"]["type"] for p in parameters}
    assert [types[name] for name in ("gamma", "max_new_tokens", "tree_width", "window", "seed", "repeat")] == \
        ["integer"] * 6
    returns = server.view_api(return_format="dict", print_info=False)["named_endpoints"]["/run"]["returns"]
    assert [r["label"] for r in returns] == ["Status", "Answer (TABED)", "Plain decoding", "Speed and acceptance",
                                             "Ensemble weights", "Block by block", "Conversation",
                                             app.DOWNLOADS_LABEL, "Token trees"]
    race = server.view_api(return_format="dict", print_info=False)["named_endpoints"]["/replay_race"]["returns"]
    assert [r["label"] for r in race] == ["Race"]  # named, not value_54
    out = named(server.predict(prompt="w1 w2", max_new_tokens=12, api_name="/run"))
    assert out["status"].startswith("\u2713 ") and "tk-" in out["tabed"]
    record, charts = (Path(f) for f in out["downloads"])  # the report carries plotly.js
    assert record.suffix == ".json" and record.stat().st_size < 200_000
    assert charts.name.endswith("-report.html") and 3_000_000 < charts.stat().st_size < 8_000_000
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    status = named(server.predict(pictures=[{"image": handle_file(str(empty)), "caption": None}], prompt="w1",
                                  api_name="/run"))["status"]
    assert "empty.png" in status and "/" not in status.split("empty.png")[0].split()[-1]
    assert "gradio" not in status and "tmp" not in status


def test_bad_values_from_an_api_client_are_one_named_line_not_an_error(server, tmp_path):
    """What a script may send that the page's controls never would: each answered in the status, naming the
    field and what it takes, as a normal result (the client raises on a server error)."""
    text = tmp_path / "notes.png"
    text.write_text("not a picture\n" * 5)
    for values, said in (({"seed": 10**20}, "seed must be a whole number from 0 to 4294967295"),
                         ({"window": -5}, "history window must be a whole number from 0 to 100000"),
                         ({"gamma": 0}, "γ (draft tokens per block) must be a whole number from 1 to 20; got 0"),
                         ({"rule": "median"}, "TABED weight rule must be one of"),
                         ({"pictures": [{"image": handle_file(str(text)), "caption": None}]}, "cannot read image")):
        status = named(server.predict(**{"prompt": "w1", "max_new_tokens": 4, **values}, api_name="/run"))["status"]
        assert status.startswith("\u26a0\ufe0f Error: ") and said in status, status
