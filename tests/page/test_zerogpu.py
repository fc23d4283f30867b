"""ZeroGPU's fork rehearsed on the CPU: with a stand-in for `spaces.GPU` that forks a worker per request, pickles
the arguments in and every yield out (`tests/zerogpu/spaces.py`), the real handlers serve a run, a follow-up,
the stepper, a replayed race and a stopped run (`tests/zerogpu/rehearse.py`, in a fresh process as a Space
starts one)."""

import json
import os
import subprocess
import sys

import pytest

from conftest import status_text
from mutants import ROOT


@pytest.fixture(scope="module")
def rehearsal():
    env = {**os.environ, "SPACES_ZERO_GPU": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "zerogpu"), str(ROOT)])}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "zerogpu" / "rehearse.py"),
                           str(ROOT / "assets" / "examples" / "shapes.png")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_run_and_its_follow_up_cross_the_fork_whole(rehearsal):
    """Every yield crossed (a run's frames, then its finished page); the conversation went on from the state the
    first run yielded, while the main process's own copy of it never changed (the worker's changes stay there)."""
    first, follow = rehearsal["first"], rehearsal["follow"]
    assert rehearsal["zero_gpu"] and rehearsal["workers"] == 3  # a worker per request
    assert first["yields"] >= 2 and status_text(first["status"]).startswith("\u2713 TABED")
    assert 'data-run="1" title="run 1 · teaching' in first["status"]
    assert first["turns"] == 1 and first["blocks"] > 1 and first["tokenizer"] != "NoneType"
    assert follow["yields"] >= 2 and 'data-run="2"' in follow["status"] and follow["turns"] == 2
    assert follow["first_state_turns"] == 1


@pytest.mark.slow
def test_the_stepper_and_the_race_read_only_what_crossed(rehearsal):
    assert "Block 1 of blocks 0\u2013" in rehearsal["step"] and "<table>" in rehearsal["step"]
    race = rehearsal["race"]
    assert race.count("done in") == 2 and "TABED" in race and "plain decoding" in race


@pytest.mark.slow
def test_a_stopped_run_ends_its_worker_and_nothing_is_left_behind(rehearsal):
    assert all(status_text(status).startswith("\u25f7 TABED decoding") for status in rehearsal["stopped_seen"])
    assert rehearsal["children_left"] == 0 and rehearsal["threads_left"] == []
    assert not rehearsal["cuda_initialized"]  # the main process never touched CUDA


@pytest.mark.slow
def test_each_requests_duration_is_computed_from_its_arguments_before_the_fork(rehearsal):
    assert rehearsal["durations"] == [30 + 0.25 * 2 * 24, 30 + 0.25 * 2 * 24, 30 + 0.25 * 2 * 200]
