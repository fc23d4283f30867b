"""The package's public API, as its docstring shows it: the example runs as written."""

import contextlib
import io
import os
from pathlib import Path

import tabed

ROOT = Path(__file__).resolve().parent.parent


def test_the_docstring_example_runs_and_is_lossless():
    code = tabed.__doc__.split("\nLayers")[0].splitlines()[1:]  # the indented block after the first line
    example = "\n".join(line[4:] for line in code)
    printed = io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        with contextlib.redirect_stdout(printed):
            exec(compile(example, "tabed.__doc__", "exec"), {})  # noqa: S102 - our own docstring
    finally:
        os.chdir(cwd)
    lines = printed.getvalue().splitlines()
    assert len(lines) >= 2 and lines[0].startswith("{'M': 0.5, 'T': 0.5}")  # the first block: uniform weights
    assert " True " in lines[-1]  # speculative decoding gave plain decoding's tokens


def test_everything_exported_exists():
    assert all(hasattr(tabed, name) for name in tabed.__all__)
