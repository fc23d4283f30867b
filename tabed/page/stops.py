"""The Stop button's flags, per browser session."""

from __future__ import annotations

import threading
import time


class StopFlags:
    """Per browser session, a flag for each of its running events. The Stop button sets them; the running
    generator sees it, lets the engine end between blocks and yields its last frame: "Stopped", with what
    was decoded so far. (Gradio's `cancels=` kills a generator before it can yield that frame.)

    Stop is not queued and Run is: a Stop clicked right after Run can reach the server before the run has
    begun. Such a Stop is kept for `EARLY_S` seconds and stops the session's next run as it begins."""

    EARLY_S = 2.0

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flags: dict[str, set[threading.Event]] = {}
        self.early: dict[str, float] = {}  # session -> when a Stop found nothing running

    def begin(self, session: str | None) -> threading.Event:
        flag = threading.Event()
        if session:
            with self.lock:
                self.flags.setdefault(session, set()).add(flag)
                if time.monotonic() - self.early.pop(session, -self.EARLY_S) < self.EARLY_S:
                    flag.set()
        return flag

    def end(self, session: str | None, flag: threading.Event) -> None:
        with self.lock:
            flags = self.flags.get(session or "", set())
            flags.discard(flag)
            if not flags:
                self.flags.pop(session or "", None)

    def stop(self, session: str | None) -> None:
        with self.lock:
            running = self.flags.get(session or "", ())
            for flag in running:
                flag.set()
            now = time.monotonic()
            self.early = {s: t for s, t in self.early.items() if now - t < self.EARLY_S}
            if session and not running:
                self.early[session] = now
