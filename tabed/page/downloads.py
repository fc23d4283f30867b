"""A run's downloads: its record (JSON) and its charts (one HTML page that opens offline), named for the
run they show.

Every file a handler returns is served from Gradio's cache: a file outside it is copied in and kept an hour,
so that a chart page with plotly.js inside (4.8 MB) written by every run cost a busy Space gigabytes. These
files are written inside the cache, which Gradio serves without copying, and a session keeps one run's:
each run's replace the last's, "New conversation" and the session's end delete them, and Gradio's own
`delete_cache` removes what a client without a session (an API script) leaves, after an hour.
"""

from __future__ import annotations

import functools
import html
import json
import shutil
import tempfile
import time
from pathlib import Path

import plotly.graph_objects as go
from gradio.utils import get_upload_folder
from plotly.offline import get_plotlyjs

from .conversation import Conversation


@functools.cache
def _folder() -> tempfile.TemporaryDirectory:
    cache = Path(get_upload_folder())
    cache.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix="tabed-downloads-", dir=cache, ignore_cleanup_errors=True)


def downloads_root() -> Path:
    """The server process's folder of run downloads, inside Gradio's cache (one subfolder per session's last
    run), removed when the process exits (Ctrl-C included)."""
    return Path(_folder().name)


def forget_downloads(conversation: object) -> None:
    """Delete the session's last downloads: before its next run's, on "New conversation", and when Gradio
    deletes the session's state, an hour after its browser tab closed."""
    if isinstance(conversation, Conversation) and conversation.export_dir:
        shutil.rmtree(conversation.export_dir, ignore_errors=True)
        conversation.export_dir = None


def run_title(run: int, spec: str, prompt: str, when: float) -> str:
    """What a download says it shows: the session's run number, what decoded, when, and the prompt."""
    shown = prompt if len(prompt) <= 60 else prompt[:59] + "…"
    return f"TABED demo, run {run}: {spec}, {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when))}: “{shown}”"


def chart_page(title: str, figures: list[go.Figure]) -> str:
    """The figures on one HTML page titled `title`, plotly.js inside (it opens with the network off)."""
    charts = "\n".join(figure.to_html(full_html=False, include_plotlyjs=False) for figure in figures)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>\n'
            f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n'
            f'<body style="font-family: sans-serif"><h1 style="font-size: 1.1em">{html.escape(title)}</h1>\n'
            f"{charts}\n</body></html>\n")


def write_downloads(conversation: Conversation, record: dict, figures: list[go.Figure], when: float) -> list[str]:
    """The run as JSON and its charts as one offline page, in place of the session's previous downloads;
    both named for the run (`tabed-20261202-041233-run3.json`, `…-run3-charts.html`)."""
    forget_downloads(conversation)
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=downloads_root()))
    conversation.export_dir = str(folder)
    request = record["request"]
    stem = f"tabed-{time.strftime('%Y%m%d-%H%M%S', time.localtime(when))}-run{conversation.runs}"
    title = run_title(conversation.runs, request["spec"], request["prompt"], when)
    files = [folder / f"{stem}.json", folder / f"{stem}-charts.html"]
    files[0].write_text(json.dumps({"title": title, **record}, indent=2))
    files[1].write_text(chart_page(title, figures), encoding="utf-8")
    return [str(file) for file in files]
