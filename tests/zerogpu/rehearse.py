"""Drive the app's handlers as a ZeroGPU Space would run them (with `spaces.py` beside this file standing in for
the real package): a run, a follow-up, the stepper, a replayed race, and a run stopped by closing it; print what
crossed as JSON for `tests/page/test_zerogpu.py`. Run in a fresh process: `SPACES_ZERO_GPU=1
PYTHONPATH=tests/zerogpu:. python tests/zerogpu/rehearse.py PICTURE`."""

import json
import multiprocessing
import sys
import threading

import spaces  # the stand-in, before app imports it
import torch

torch.set_num_threads(1)  # no thread pool in the main process: one made before a fork hangs the worker's matmuls
import app  # noqa: E402
from tabed.engine import session  # noqa: E402
from tabed.page.view import Frame  # noqa: E402

# what crosses the fork is rehearsed here, not the timing: the machine's load (these tests share it) must not
# refuse the race, as a busy machine's run is
session.BUSY_SHARE, app.PAIRS.quiet = 0.0, None


def frames(handler, *args, **kwargs) -> list[Frame]:
    return [Frame(*values) for values in handler(*args, **kwargs)]


def main(picture: str) -> dict:
    settings = {"max_new_tokens": 24}
    first = frames(app.run, picture, "Describe the image.", None, **settings)
    state = first[-1].state
    _, step = app.show_step(state, 1)
    follow = frames(app.ask_follow_up, None, "Which shape is on the left?", state, **settings)
    race = list(app.replay_race(follow[-1].state))
    stopped = app.run(picture, "Describe the image in detail.", None, max_new_tokens=200)
    seen = [Frame(*next(stopped)) for _ in range(3)]
    stopped.close()  # Gradio's cancels=: the Stop of a ZeroGPU page
    return {
        "durations": spaces.DURATIONS, "workers": len(set(spaces.WORKERS)),
        "first": {"yields": len(first), "status": first[-1].status, "turns": len(state.turns),
                  "tokenizer": type(state.last.tokenizer).__name__, "blocks": len(state.last.blocks)},
        "step": step, "follow": {"yields": len(follow), "status": follow[-1].status,
                                 "turns": len(follow[-1].state.turns), "first_state_turns": len(state.turns)},
        "race": race[-1], "stopped_seen": [frame.status for frame in seen],
        "children_left": len(multiprocessing.active_children()),
        "threads_left": sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()
                               and t.name.startswith("tabed")),
        "cuda_initialized": torch.cuda.is_initialized(), "zero_gpu": app.ZERO_GPU,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
