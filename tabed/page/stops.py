"""The Stop button's flags, per browser session, and the run asked for while one of its runs decodes."""

from __future__ import annotations

import threading
import time


class StopFlags:
    """Per browser session, a flag for each of its running events. The Stop button sets them; the running
    generator sees it, lets the engine end between blocks and yields its last frame: "Stopped", with what
    was decoded so far. (Gradio's `cancels=` kills a generator before it can yield that frame.)

    Stop is not queued and Run is: a Stop clicked right after Run can reach the server before the run has
    begun. Such a Stop is kept for `EARLY_S` seconds and stops the session's next run as it begins.

    Run pressed while one of the session's runs decodes queues the new run behind it (one decode at a time); the
    running one's frames overwrite the status that says so, so the session is kept in `asked` (`ask`) until the
    new run begins (`taken`), for those frames to say it (`waiting`)."""

    EARLY_S = 2.0

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flags: dict[str, set[threading.Event]] = {}
        self.early: dict[str, float] = {}  # session -> when a Stop found nothing running
        self.asked: set[str] = set()  # sessions with a run queued behind one of theirs

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

    def ask(self, session: str | None) -> None:
        """Run pressed: while one of the session's runs is on its way, the new one waits behind it."""
        with self.lock:
            if session and self.flags.get(session):
                self.asked.add(session)

    def waiting(self, session: str | None) -> bool:
        """Whether a run of the session waits behind the one on its way."""
        return session in self.asked

    def taken(self, session: str | None) -> None:
        """The session's queued run has begun."""
        with self.lock:
            self.asked.discard(session)
