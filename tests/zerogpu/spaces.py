"""A stand-in for Hugging Face's `spaces` package that does what ZeroGPU does to a decorated handler, on a CPU: the
duration is computed from the arguments in the main process, then the handler runs in a forked worker; its
arguments go in pickled and every yield comes out pickled; closing the generator (Gradio's `cancels=`, the
Stop of a ZeroGPU page) ends the worker. Only what is yielded reaches the main process.

`tests/page/test_zerogpu.py` puts this folder first on the path of a fresh process, so that `import spaces`
in app.py finds it."""

from __future__ import annotations

import functools
import multiprocessing
import os
import pickle

DURATIONS: list[int] = []  # each request's duration, as the decorator computed it
WORKERS: list[int] = []  # each request's worker's process id


def _worker(function, payload: bytes, writer) -> None:
    args, kwargs = pickle.loads(payload)
    try:
        for value in function(*args, **kwargs):
            writer.send_bytes(pickle.dumps(("yield", value)))
        writer.send_bytes(pickle.dumps(("done", None)))
    except BaseException as error:  # noqa: BLE001 - whatever the handler raised goes back to the caller
        writer.send_bytes(pickle.dumps(("error", error)))
    finally:
        writer.close()
        os._exit(0)  # as a forked worker ends: no atexit of the main process's runs here


def GPU(function=None, duration=60):  # noqa: N802 - the name spaces gives it
    def decorate(handler):
        @functools.wraps(handler)
        def run(*args, **kwargs):
            DURATIONS.append(duration(*args, **kwargs) if callable(duration) else duration)
            payload = pickle.dumps((args, kwargs))
            context = multiprocessing.get_context("fork")
            reader, writer = context.Pipe(duplex=False)
            worker = context.Process(target=_worker, args=(handler, payload, writer), daemon=True)
            worker.start()
            WORKERS.append(worker.pid)
            writer.close()
            try:
                while True:
                    try:
                        kind, value = pickle.loads(reader.recv_bytes())
                    except EOFError:
                        raise RuntimeError("the ZeroGPU worker ended without finishing") from None
                    if kind == "error":
                        raise value
                    if kind == "done":
                        return
                    yield value
            finally:
                if worker.is_alive():
                    worker.terminate()
                worker.join()
                reader.close()

        return run

    return decorate(function) if function is not None else decorate
