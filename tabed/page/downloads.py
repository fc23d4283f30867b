"""A run's downloads: its record (JSON) and its report (one HTML page that opens offline: the verdict and its
reasons, both answers coloured as on the page, the metrics, the charts, the settings, the pair and the
machine), named for the run they show.

Every file a handler returns is served from Gradio's cache: a file outside it is copied in and kept an hour,
so that a report with plotly.js inside (4.8 MB) written by every run cost a busy Space gigabytes. These
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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Report:
    """What a run's report shows, as the page words it (HTML where it says so: text in it already escaped)."""

    verdict: str  # the status: the verdict and its reasons (HTML)
    legend: str  # what the answers' colours mean (HTML)
    answers: list[tuple[str, str, str]]  # (element id, label, the answer as coloured tokens: HTML)
    metrics: list[list]  # the metrics table's rows: name, then each side's figure
    headers: list[str]  # its columns
    figures: list[go.Figure]  # the weights chart, and the trees chart when the run drafted trees
    settings: dict[str, object]  # the request: what decoded, and every setting
    machine: str  # the pair, where it ran, and the machine


def report_page(title: str, report: Report, css: str) -> str:
    """The run's report: one HTML page titled `title`, the page's styles (`css`) and plotly.js inside, so that
    it opens on its own with the network off, and reads as the page did."""
    table = "".join("<tr>" + "".join(f"<td>{html.escape(str(value))}</td>" for value in row) + "</tr>"
                    for row in report.metrics)
    heads = "".join(f"<th>{html.escape(head)}</th>" for head in report.headers)
    answers = "".join(f'<h2>{html.escape(label)}</h2><div id="{element}">{answer}</div>'
                      for element, label, answer in report.answers)
    settings = "".join(f"<li>{html.escape(f'{name}: {value}')}</li>" for name, value in report.settings.items())
    charts = "\n".join(figure.to_html(full_html=False, include_plotlyjs=False) for figure in report.figures)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>\n'
            f"<style>{css}\nbody {{ font-family: sans-serif; max-width: 70em; margin: 1em auto; padding: 0 1em; }}\n"
            "table { border-collapse: collapse; } td, th { border: 1px solid #d0d7de; padding: 2px 6px; }</style>\n"
            f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n'
            f'<body><h1 style="font-size: 1.1em">{html.escape(title)}</h1>\n'
            f'<div id="status">{report.verdict}</div>\n<div id="legend">{report.legend}</div>{answers}\n'
            f'<h2>Speed and acceptance</h2><table id="metrics"><tr>{heads}</tr>{table}</table>\n{charts}\n'
            f"<h2>Settings</h2><ul>{settings}</ul>\n<h2>Pair and machine</h2><p>{html.escape(report.machine)}</p>\n"
            "</body></html>\n")


def write_downloads(conversation: Conversation, record: dict, report: Report, css: str, when: float) -> list[str]:
    """The run as JSON and its report as one offline page, in place of the session's previous downloads;
    both named for the run (`tabed-20261202-041233-run3.json`, `…-run3-report.html`)."""
    forget_downloads(conversation)
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=downloads_root()))
    conversation.export_dir = str(folder)
    request = record["request"]
    stem = f"tabed-{time.strftime('%Y%m%d-%H%M%S', time.localtime(when))}-run{conversation.runs}"
    title = run_title(conversation.runs, request["spec"], request["prompt"], when)
    files = [folder / f"{stem}.json", folder / f"{stem}-report.html"]
    files[0].write_text(json.dumps({"title": title, **record}, indent=2))
    files[1].write_text(report_page(title, report, css), encoding="utf-8")
    return [str(file) for file in files]
