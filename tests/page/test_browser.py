"""The page in headless Chromium (Debian's package, driven by playwright), like a person uses it:
first with the tiny test pair (every token colour, follow-up), then Stop at ten random moments, then
with the bundled teaching pair that `python app.py` serves by default."""

import contextlib
import json
import os
import random
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

import app
from conftest import a_word_split_by_a_rejection, hand_block, serving, word_tokenizer, workers_alive
from tabed.engine import session
from tabed.engine.events import TreeNode
from tabed.models.loading import load_preset
from tabed.page import render, worker
from tabed.page.controls import LABELS, MODES
from tabed.teaching import world

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "screenshots"


MISSING = f"Chromium not found at {CHROMIUM}: apt-get install -y chromium"
if not Path(CHROMIUM).exists() and os.environ.get("TABED_REQUIRE_BROWSER"):  # CI: a skip would hide the page
    raise RuntimeError(MISSING)
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=MISSING)
# What the page shows comes in well under a second on a quiet machine; every wait is bounded generously, so
# that a busy machine fails only a page that never shows it (playwright's own default is 5 s).
expect.set_options(timeout=30_000)


@contextlib.contextmanager
def served_page(browser):
    """The app as `python app.py` starts it, open in a page of its own of the module's Chromium."""
    _, address, _ = app.demo.launch(prevent_thread_lock=True, quiet=True, css=app.texts.CSS)
    context = browser.new_context(viewport={"width": 1400, "height": 1300})
    try:
        page = context.new_page()
        page.goto(address)
        yield page
    finally:
        context.close()
        app.demo.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="class")
def tiny_server(pair):
    """The app served with the tiny test pair standing in for the preset: fast, and its drafts are often
    rejected. One server for the class; each test opens its own page on it."""
    with serving(pair):
        _, address, _ = app.demo.launch(prevent_thread_lock=True, quiet=True, css=app.texts.CSS)
        try:
            yield address
        finally:
            app.demo.close()


@contextlib.contextmanager
def screen(browser, address: str, width: int, height: int):
    """A page of its own on `address` (a new browser context: its own Gradio session, an empty conversation and
    the default settings) in a `width` x `height` window, a touch screen under 500 px (a tap brings the mouse
    events a phone makes); closed after use whatever happened."""
    touch = width < 500
    context = browser.new_context(viewport={"width": width, "height": height}, has_touch=touch, is_mobile=touch)
    try:
        opened = context.new_page()
        opened.goto(address)
        expect(opened.locator("#run")).to_be_enabled()
        yield opened
    finally:
        context.close()


@pytest.fixture
def page(browser, tiny_server):
    """A page of its own at 1400 px."""
    with screen(browser, tiny_server, 1400, 1300) as opened:
        yield opened


@pytest.fixture
def phone(browser, tiny_server):
    """A page of its own on a 390 x 844 touch screen."""
    with screen(browser, tiny_server, 390, 844) as opened:
        yield opened


@pytest.fixture
def long_answers(pair):
    """A switch: once called, the tiny pair never writes its end token (96 tokens a side: long enough to be
    seen decoding); put back after the test, whatever happens."""
    saved = pair.target.generation_config.eos_token_id

    def lengthen() -> None:
        pair.target.generation_config.eos_token_id = [len(pair.tokenizer) + 100]

    try:
        yield lengthen
    finally:
        pair.target.generation_config.eos_token_id = saved


@pytest.fixture(scope="module")
def chart_png(tmp_path_factory) -> Path:
    """The tiny pair's picture, drawn by the world here: the app's examples change with the bundled pair."""
    path = tmp_path_factory.mktemp("pictures") / "chart.png"
    world.render(world.ChartScene((3, 8, 5), ("blue", "orange", "green"), seed=7), 256).save(path)
    return path


def verdict(page, run: int):
    """The verdict of the session's `run`-th run (never the last run's): the status's first line when it ends."""
    return page.locator(f'#status .tabed-verdict[data-run="{run}"]')


def finished(page, run: int) -> None:
    """Wait for the last frame of the session's `run`-th run: its verdict in the status, its downloads (they
    come with the charts), and the run's end on the page (Stop grey again, the verdict brought into view)."""
    expect(verdict(page, run)).to_be_visible(timeout=120_000)
    expect(page.locator("#downloads a")).to_have_count(2)
    expect(page.locator("#stop")).to_have_class(re.compile(r"\bsecondary\b"), timeout=30_000)


def ask(page, image: Path | None, prompt: str, run: int = 1, button: str = "#run") -> None:
    """Upload `image` (unless None), type `prompt`, press `button` and wait for the end of the session's `run`."""
    if image is not None:
        page.locator("#image input[type=file]").set_input_files(str(image))
        expect(page.locator("#image img")).to_have_count(1)
    page.locator("#prompt textarea").fill(prompt)
    page.locator(button).click()
    finished(page, run)


def unfolded(page, fold: str):
    """A part of the page folded one click away (an Accordion, by its elem_id), opened unless it is: Gradio
    makes its content only once it is open. The part's locator."""
    part = page.locator(f"#{fold}")
    if part.locator(".label-wrap.open").count() == 0:
        part.locator(".label-wrap").first.click()
    expect(part.locator(".label-wrap.open")).to_have_count(1)
    return part


def metrics_table(page):
    """The metrics table, its fold opened."""
    unfolded(page, "metrics-fold")
    return page.locator("#metrics")


def open_settings(page) -> None:
    """The Settings accordion, opened unless it is."""
    if not page.locator("#settings-adaptive input").is_visible():
        page.locator("#settings").get_by_text("Settings").first.click()
    expect(page.locator("#settings-adaptive input")).to_be_visible()


def set_slider(page, elem_id: str, value: float) -> None:
    """Type into a slider's number box until the slider shows it: a box typed into while the page
    re-renders after a run sometimes loses the value (seen in CI), so the typing is retried."""
    box = page.locator(f"#{elem_id} input[type=number]")
    slider = page.locator(f"#{elem_id} input[type=range]")
    expect(box).to_be_editable()
    for _ in range(5):
        box.fill(str(value))
        box.press("Enter")
        box.blur()
        with contextlib.suppress(AssertionError):
            expect(slider).to_have_value(str(value), timeout=2_000)  # a retry, not a bound: typed again
            return
    expect(slider).to_have_value(str(value), timeout=30_000)


def type_into(box, value: str) -> None:
    """Type `value` into a number box and leave it: twice in CI (the machine busy) a box typed into just after
    the page drew it showed its old value again before Run was pressed, so the typing is retried until the box
    still holds the value a moment later."""
    for _ in range(5):
        box.fill(value)
        box.blur()
        box.page.wait_for_timeout(500)  # a retry, not a bound
        if box.input_value() == value:
            return
    expect(box).to_have_value(value)


def click_until(point, shown) -> None:
    """Click a chart's point where it stands still, and again if `shown` does not come to hold: once in a
    full run (the machine busy) a click on the weights chart just after the page was resized selected
    nothing, plotly still moving its points to the new width."""
    for _ in range(3):
        point.scroll_into_view_if_needed()
        box = None
        for _ in range(25):  # where two reads 0.2 s apart agree
            moved, box = box, point.bounding_box()
            if box == moved:
                break
            point.page.wait_for_timeout(200)
        point.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        with contextlib.suppress(AssertionError):
            shown()  # a retry, not a bound: as a person would, click again
            return
    shown()


def no_error_badge(page) -> None:
    """Gradio shows a failed event as "Error" badges over the outputs and a toast: the page has none."""
    assert page.get_by_text("Error", exact=True).count() == 0
    assert page.locator(".toast-body").count() == 0


class TestWithTheTinyPair:
    """Each test on a page of its own (`page`), making the answers it reads."""

    def test_upload_ask_run_and_see_every_part_of_the_answer(self, page, chart_png):
        ask(page, chart_png, "w1 w2 w3")
        answer = page.locator("#tabed-answer")
        assert answer.locator(".tk-accepted").count() > 0
        assert answer.locator(".tk-rejected").count() > 0
        assert "line-through" in answer.locator(".tk-rejected").first.get_attribute("style")
        assert "target p=" in answer.locator(".tk-accepted").first.get_attribute("title")
        expect(page.locator("#plain-answer .tk-plain").first).to_be_visible()
        expect(metrics_table(page)).to_contain_text("block efficiency")
        expect(page.locator("#weights-plot .js-plotly-plot")).to_have_count(1)
        expect(page.locator("#blocks")).to_contain_text("ensemble draft")
        SCREENSHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "app.png"), full_page=True)
        assert (SCREENSHOTS / "app.png").stat().st_size > 20_000

    def test_during_a_race_the_last_runs_charts_are_gone_and_the_new_ones_come_at_the_end(self, page, chart_png,
                                                                                           long_answers):
        """Charts drawn during the race would take the cores from the side being timed: while either side
        decodes the page shows the tokens, no chart, no download and no replayed race (the last run's are
        cleared) and says the charts come at the end; then the charts and downloads."""
        ask(page, chart_png, "w1 w2")
        page.locator("#race").click()  # the last run's replayed race, to its end
        expect(page.locator("#race-view")).to_contain_text("at the measured pace", timeout=30_000)
        button, race = page.locator("#race").bounding_box(), page.locator("#race-view").bounding_box()
        assert 0 <= race["y"] - (button["y"] + button["height"]) < 40, (button, race)  # right under its button
        expect(page.locator("#race-view")).to_contain_text("\u2714 ")
        expect(page.locator("#race-view")).not_to_contain_text("\u258c")
        long_answers()
        page.locator("#prompt textarea").fill("w1 w2 w3")
        page.locator("#run").click()
        during = page.wait_for_function("""() => {
            const status = document.querySelector('#status')?.innerText || '';
            return status.includes('decoding…') &&  // in progress, not a verdict that names plain decoding
                {plots: document.querySelectorAll('#weights-plot .js-plotly-plot').length, status,
                 downloads: document.querySelectorAll('#downloads a').length,
                 race: document.querySelector('#race-view')?.innerText.trim() || ''};
        }""", polling=50, timeout=120_000).json_value()  # every 50 ms: a busy browser may hold back its frames
        finished(page, 2)
        assert during["plots"] == 0 and during["downloads"] == 0 and during["race"] == "", during
        assert "the charts come when both sides are done" in during["status"], during
        expect(page.locator("#weights-plot .js-plotly-plot")).to_have_count(1)
        expect(metrics_table(page)).to_contain_text("block efficiency")

    def test_a_file_that_is_no_picture_is_refused_with_a_message(self, page, chart_png, tmp_path, monkeypatch):
        """A corrupted PNG and a text file named `.png` are taken off the gallery with a line naming them (no
        server path), the picture beside them stays and Run goes on; past eight pictures the rest are left
        out, and the status says so. A file added while the last one's check is still on its way (a busy
        server: here the first check takes a second) is checked too."""
        broken, text = tmp_path / "broken.png", tmp_path / "notes.png"
        broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a picture" * 20)
        text.write_text("a shopping list, not a picture\n" * 8)
        checks = []
        monkeypatch.setattr(app, "checked_upload", lambda upload, check=app.checked_upload: (
            checks.append(1), len(checks) == 1 and time.sleep(1.0), check(upload))[-1])
        page.locator("#image input[type=file]").set_input_files(str(chart_png))
        expect(page.locator("#image img")).to_have_count(1)
        for bad in (broken, text):
            page.locator("#image input[type=file]").set_input_files(str(bad))
            expect(page.locator("#status")).to_contain_text(f"cannot read image {bad.name}", timeout=30_000)
            assert "Traceback" not in page.content() and "/tmp/" not in page.locator("#status").inner_text()
            expect(page.locator("#image img")).to_have_count(1)  # taken off the page, the chart kept
        page.locator("#prompt textarea").fill("w1 w2")
        page.locator("#run").click()
        finished(page, 1)
        copies = [tmp_path / f"picture-{i}.png" for i in range(9)]
        for copy in copies:
            copy.write_bytes(chart_png.read_bytes())
        page.locator("#new").click()
        expect(page.locator("#image img")).to_have_count(0)  # a new conversation's pictures: none yet
        page.locator("#image input[type=file]").set_input_files([str(copy) for copy in copies])
        expect(page.locator("#status")).to_contain_text("picture-8.png left out: at most 8 pictures at once")
        expect(page.locator("#image img")).to_have_count(8)
        no_error_badge(page)

    def test_follow_up_from_the_page(self, page, chart_png):
        """A follow-up joins the conversation; a token's detail from the last answer goes when the next run
        starts, and when a new conversation does (it would speak of a token no longer shown)."""
        ask(page, chart_png, "w1 w2")
        detail = page.locator("#token-detail")
        page.locator("#tabed-answer .tk").first.click()
        expect(detail).to_contain_text("block 0")
        ask(page, None, "w4 w5", run=2, button="#follow-up")
        expect(page.locator("#chat")).to_contain_text("w4 w5")
        expect(detail).to_have_text(app.texts.DETAIL_PROMPT)
        page.locator("#tabed-answer .tk").first.click()
        page.locator("#new").click()
        expect(detail).to_have_text(app.texts.DETAIL_PROMPT)
        assert workers_alive() == 0

    def test_new_conversation_clears_the_page(self, page, chart_png):
        ask(page, chart_png, "w4 w5")
        page.locator("#new").click()
        expect(page.locator("#status")).to_contain_text("Start a new conversation")
        expect(page.locator("#chat")).not_to_contain_text("w4 w5")
        expect(page.locator("#tabed-answer .tk")).to_have_count(0)
        expect(page.locator("#plain-answer .tk")).to_have_count(0)
        expect(page.locator("#weights-plot .js-plotly-plot")).to_have_count(0)
        expect(page.locator("#downloads a")).to_have_count(0)
        expect(metrics_table(page)).not_to_contain_text("block efficiency")
        expect(page.locator("#blocks")).not_to_contain_text("M 0.")  # headers only: no block's weights
        expect(page.locator("#image img")).to_have_count(0)  # a new conversation picks its pictures anew
        expect(page.locator("#prompt textarea")).to_have_value("")

    def test_step_through_every_block_at_1400_and_390_px(self, page, chart_png):
        """Every block of an answer, one at a time with next (after tapping rows of the block table), and one
        tapped in the weights chart, on a wide screen and a phone's: each shows its drafts, as the block table
        has them, with a verdict and a reason for each, the target's own token, and how the weights were
        chosen. A block number that is none of the answer's shows the nearest and the status says so."""
        view = page.locator("#step-view")
        expect(view).to_contain_text("Run a prompt")
        ask(page, chart_png, "w1 w2 w3")
        expect(view).to_contain_text("Block 0 of blocks 0–")
        last = int(re.search(r"Block 0 of blocks 0–(\d+)", view.inner_text())[1])
        assert last >= 2
        for width in (1400, 390):
            page.set_viewport_size({"width": width, "height": 1300})
            for row in (1, 0):  # a tap on a row of the block table shows that block
                cell = page.locator(f'#blocks [data-testid="cell-{row}-0"]')
                cell.click()
                with contextlib.suppress(AssertionError):  # a click while the table redraws (a busy machine's
                    expect(view).to_contain_text(f"Block {row} of", timeout=10_000)  # browser) selects nothing:
                    continue  # as a person would, click again
                cell.click()
                expect(view).to_contain_text(f"Block {row} of")
            for index in range(last + 1):
                expect(view).to_contain_text(f"Block {index} of blocks 0–{last}")
                cell = page.locator(f'#blocks [data-testid="cell-{index}-2"]')  # its ensemble draft
                cell.scroll_into_view_if_needed()
                table_drafts = cell.inner_text().split(" | ")
                cells = view.locator("table tr:not(.tabed-why)")
                drafts = [cells.nth(i).locator("td").nth(1).inner_text().strip("'") for i in range(1, cells.count())]
                assert drafts == table_drafts[:len(drafts)] and drafts, (index, drafts, table_drafts)
                verdicts = view.locator("table tr:not(.tabed-why) td:last-child").all_inner_texts()
                assert all(v in ("\u2713 kept", "\u2717 rejected") for v in verdicts)
                assert view.locator(".tabed-why").count() == len(drafts) + 1  # a reason each, then the target's
                expect(view).to_contain_text("eights")  # the weights, and how they were chosen
                assert view.bounding_box()["width"] <= width  # the table scrolls inside it on a phone, as it says
                hint = view.locator(".tabed-scroll-hint")
                expect(hint).to_be_visible() if width < 640 else expect(hint).to_be_hidden()
                if index < last:
                    page.locator("#step-next").click()
            page.locator("#step-next").click()  # past the last block: it stays there
            expect(view).to_contain_text(f"Block {last} of blocks 0–{last}")
            point = page.locator("#weights-plot .scatterlayer .trace").first.locator(".point").nth(1)
            click_until(point, lambda: expect(view).to_contain_text(f"Block 1 of blocks 0–{last}"))  # block 1
        index = page.locator("#step-index input")
        index.fill("-3")
        index.press("Enter")
        expect(view).to_contain_text(f"block -3 is not one of this answer's blocks (0 to {last})")  # where typed
        expect(page.locator("#status")).to_contain_text("Exact")  # the status keeps the run's reasons
        expect(view).to_contain_text(f"Block 0 of blocks 0–{last}")
        no_error_badge(page)

    def test_the_block_asked_last_is_the_one_shown_while_steps_are_slow(self, page, chart_png, monkeypatch):
        """Blocks asked quickly, each while the last is still on its way (each step held 0.6 s here, as on a
        busy machine): a number typed after next, then a second number typed over the first, then a row of the
        block table picked, then next twice; the stepper ends on each one asked last, none dropped."""
        ask(page, chart_png, "w1 w2 w3")
        view = page.locator("#step-view")
        last = int(re.search(r"Block 0 of blocks 0–(\d+)", view.inner_text())[1])
        assert last >= 2
        drawn = app.stepper.step_html

        def slowly(*args, **kwargs):
            time.sleep(0.6)
            return drawn(*args, **kwargs)

        monkeypatch.setattr(app.stepper, "step_html", slowly)
        index = page.locator("#step-index input")
        page.locator("#step-next").click()
        index.fill(str(last))
        index.press("Enter")
        expect(view).to_contain_text(f"Block {last} of blocks 0–{last}")
        for typed in (1, 2):
            index.fill(str(typed))
            index.press("Enter")
        expect(view).to_contain_text(f"Block 2 of blocks 0–{last}")
        page.locator("#step-previous").click()
        page.locator('#blocks [data-testid="cell-0-0"]').click()
        expect(view).to_contain_text(f"Block 0 of blocks 0–{last}")
        page.wait_for_timeout(1500)  # nothing asked earlier lands after it
        expect(view).to_contain_text(f"Block 0 of blocks 0–{last}")
        expect(index).to_have_value("0")
        for _ in range(2):  # each quick click counts
            page.locator("#step-next").click()
        expect(view).to_contain_text(f"Block 2 of blocks 0–{last}")
        expect(index).to_have_value("2")
        for _ in range(3):  # back, and past block 0: previous stops there, with nothing to put right
            page.locator("#step-previous").click()
        expect(view).to_contain_text(f"Block 0 of blocks 0–{last}")
        page.wait_for_timeout(1500)
        expect(index).to_have_value("0")
        expect(view).not_to_contain_text("is not one of")

    @pytest.mark.parametrize("width", [1400, 390])
    def test_a_repeated_run_headlines_its_median_and_its_race_slows_to_a_quarter(self, browser, tiny_server,
                                                                                chart_png, width, monkeypatch,
                                                                                long_answers):
        """Repeat set to 3 in the settings: the verdict names the median of 3 runs and their range, the metrics
        the range; the race replayed at ×¼ says so on the race (a starved run would give no figure: the busy
        check is off here, so that the machine's load cannot change what is checked)."""
        monkeypatch.setattr(session, "BUSY_SHARE", 0.0)
        long_answers()  # long enough to time
        with screen(browser, tiny_server, width, 1300) as page:
            open_settings(page)
            set_slider(page, "settings-repeat", 3)
            ask(page, chart_png, "w1 w2 w3")
            expect(verdict(page, 1)).to_contain_text(re.compile(r"the median of 3 runs, [\d.]+–[\d.]+×"))
            expect(metrics_table(page)).to_contain_text("speedup over 3 runs of each side")
            page.locator("#race-pace").get_by_text("×¼").click()
            page.locator("#race").click()
            race = page.locator("#race-view")
            expect(race).to_contain_text("(at ×0.25 of the measured pace, slowed to follow)")
            expect(race).to_contain_text("\u2714 ", timeout=60_000)
            assert race.bounding_box()["width"] <= width
            no_error_badge(page)

    def test_the_downloaded_report_opens_with_the_network_off_and_shows_the_run(self, page, chart_png):
        """The run's report carries plotly.js and the page's styles: opened with every request but the file's
        own refused, it shows the verdict and its reasons, both answers coloured as on the page with the legend,
        the metrics, the weights and the hedged first block's tree, the settings and the machine, under a title
        naming the run; each download's name says which run of the session it is."""
        from tabed.page.downloads import downloads_root

        ask(page, chart_png, "w1 w2 w3")
        ask(page, None, "w4", run=2, button="#follow-up")
        names = page.locator("#downloads a").evaluate_all("links => links.map(a => a.href.split('/').pop())")
        assert sorted(re.sub(r"\d{8}-\d{6}", "T", name) for name in names) == ["tabed-T-run2-report.html",
                                                                             "tabed-T-run2.json"], names
        chart = next(downloads_root().rglob(next(name for name in names if name.endswith(".html"))))
        offline = page.context.new_page()
        refused = []
        offline.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                      else (refused.append(route.request.url), route.abort()))
        offline.goto(chart.as_uri())
        expect(offline.locator(".js-plotly-plot")).to_have_count(2)
        expect(offline.locator(".js-plotly-plot .scatterlayer .trace").first).to_be_attached()
        assert offline.evaluate("typeof window.Plotly") == "object" and refused == []
        assert offline.title().startswith("TABED demo, run 2: tabed-MT, ") and offline.title().endswith("“w4”")
        expect(offline.locator("#status .tabed-verdict")).to_have_text(verdict(page, 2).inner_text())
        assert offline.locator("#status details").count() == page.locator("#status details").count() > 0
        for answer in ("#tabed-answer", "#plain-answer"):  # the same tokens, coloured alike
            shown, kept = page.locator(f"{answer} .tk"), offline.locator(f"{answer} .tk")
            assert kept.all_text_contents() == shown.all_text_contents() and kept.count() > 0
            colour = "el => getComputedStyle(el).color"
            assert kept.first.evaluate(colour) == shown.first.evaluate(colour)
        expect(offline.locator("#legend")).to_contain_text("rejected")
        expect(offline.locator("#metrics")).to_contain_text("block efficiency")
        expect(offline.locator("body")).to_contain_text("drafting: tabed-MT")
        expect(offline.locator("body")).to_contain_text("tiny on cpu (float32); ")
        offline.screenshot(path=str(SCREENSHOTS / "report.png"), full_page=True)
        offline.close()

    def test_the_page_reads_on_a_wide_screen_and_a_phone(self, page, chart_png):
        """At 1400 px and 390 px: the status in view right after Run, no sideways scroll of the page, the block
        table's six leading columns in view together, the chart's block numbers apart and its legend clear of
        the axes, struck drafts above the words they split, rejected drafts hidden on demand (their count shown),
        and a token's details on a tap."""
        for run, width in enumerate((1400, 390), 1):
            page.locator("#image input[type=file]").set_input_files(str(chart_png))
            expect(page.locator("#image img")).to_have_count(1)
            page.set_viewport_size({"width": width, "height": 900})
            page.evaluate("window.scrollTo(0, 0)")
            page.locator("#prompt textarea").fill("w1 w2 w3")
            page.locator("#run").click()
            status = page.locator("#status")
            finished(page, run)  # the session's runs count on in a new conversation
            box = status.bounding_box()
            assert -1 <= box["y"] and box["y"] + box["height"] <= 900, box  # in view, not a screen below Run
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            _leading_columns_in_view(page)
            _words_whole(page, "#blocks .header-cell")
            _words_whole(page, '#blocks .body-cell[data-col="4"]')  # "corrected: x" (it broke as "correcte d")
            metrics_table(page)
            _words_whole(page, "#metrics td")
            _chart_legible(page)
            _struck_drafts_above_whole_words(page)
            _rejected_drafts_hide_and_count(page)
            page.locator("#tabed-answer .tk-accepted").first.click()
            expect(page.locator("#token-detail")).to_contain_text("target p=")
            page.locator("#new").click()
            expect(page.locator("#downloads a")).to_have_count(0)
            expect(page.locator("#image img")).to_have_count(0)

    @pytest.mark.parametrize("width, height", [(1400, 900), (390, 844)])
    def test_a_finished_run_shows_its_verdict_and_answer_first_and_folds_each_reason(self, browser, tiny_server,
                                                                                     chart_png, width, height):
        """When a run ends, its verdict (at most 30 words: the speed, that the answer is exact, why) and the
        answer's first token are in view; each reason is one line of at most 25 words, folded, and a click opens
        its whole explanation."""
        with screen(browser, tiny_server, width, height) as page:
            ask(page, chart_png, "w1 w2 w3")
            page.wait_for_timeout(500)  # the frames after the last: the page settles where the run left it
            first = verdict(page, 1)
            line = first.inner_text()
            assert len(line.split()) <= 30 and re.search(r"[\d.]+×|unreliable|too short", line), line
            assert "identical, " in line and "each check by the big model produced" in line, line
            for shown in (first, page.locator("#tabed-answer .tk").first):
                box = shown.bounding_box()
                assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, (shown, box)
            reasons = page.locator("#status .tabed-reasons > li")
            assert reasons.count() >= 3
            for k in range(reasons.count()):
                summary = reasons.nth(k).locator("summary")
                assert len(summary.inner_text().split()) <= 25, summary.inner_text()
                expect(reasons.nth(k).locator(".tabed-detail")).not_to_be_visible()
            exact = reasons.filter(has_text="Exact")
            exact.locator("summary").click()
            expect(exact.locator(".tabed-detail")).to_be_visible()
            expect(exact.locator(".tabed-detail")).to_contain_text("Exact means the target's own answer")

    @pytest.mark.parametrize("width, height", [(1400, 900), (390, 844)])
    def test_a_tokens_detail_never_covers_it_and_a_phone_reads_and_taps_whole(self, browser, tiny_server, chart_png,
                                                                               width, height):
        """A token clicked (or tapped) near the screen's bottom stays in view above its detail; on a phone a
        struck draft is a finger's target (24 px tall) and each of the stepper's lines wraps whole, cut nowhere."""
        with screen(browser, tiny_server, width, height) as page:
            ask(page, chart_png, "w1 w2 w3")
            detail = page.locator("#token-detail")
            tokens = page.locator("#tabed-answer .tk:not(.tk-rejected):not(.tk-discarded)")
            for index in range(min(tokens.count(), 6)):
                token = tokens.nth(index)
                token.scroll_into_view_if_needed()
                page.evaluate("t => window.scrollBy(0, t.getBoundingClientRect().bottom - window.innerHeight + 4)",
                              token.element_handle())  # the token at the screen's very bottom
                token.tap() if width < 500 else token.click()
                expect(detail.locator(".filled")).to_have_count(1)
                below, cover = token.bounding_box(), detail.bounding_box()
                assert below["y"] + below["height"] <= cover["y"] + 1, (index, below, cover)
                # the tap stepped the stepper to the token's block: settled before anything else is asked of it
                expect(page.locator("#step-view")).to_contain_text(f"Block {token.get_attribute('data-block')} of")
            if width < 500:
                struck = page.locator("#tabed-answer .tk-drafts .tk")
                assert struck.count() and min(box["height"] for box in
                                              struck.evaluate_all("e => e.map(x => x.getBoundingClientRect())")) >= 24
                for index in range(len(page.locator("#blocks [data-testid^='cell-'][data-testid$='-0']").all())):
                    page.locator("#step-index input").fill(str(index))
                    page.locator("#step-index input").press("Enter")
                    expect(page.locator("#step-view")).to_contain_text(f"Block {index} of")
                    cut = page.locator("#step-view .tabed-why div").evaluate_all(
                        f"e => e.filter(x => x.scrollWidth > x.clientWidth + 1 || x.getBoundingClientRect().right > "
                        f"{width}).map(x => x.innerText)")
                    assert cut == [], (index, cut)

    @pytest.mark.parametrize("width", [1400, 390])
    def test_typed_markup_is_shown_as_text_everywhere(self, page, chart_png, width):
        """A prompt holding markup is words: the conversation and the downloads show it as typed, and no tag of it
        is made anywhere on the page (no picture fetched, no script run, no bold)."""
        page.set_viewport_size({"width": width, "height": 1300})
        typed = '<b>w1</b> <img src=x onerror="window.tabedInjected=1"> w2'
        ask(page, chart_png, typed)
        expect(page.locator("#chat")).to_contain_text(typed)
        assert page.locator("#chat img[src='x'], #chat b").count() == 0
        assert page.locator("img[src='x']").count() == 0  # the status, the stepper, the answers: none made it
        assert page.evaluate("window.tabedInjected") is None
        from tabed.page.downloads import downloads_root

        names = page.locator("#downloads a").evaluate_all("links => links.map(a => a.href.split('/').pop())")
        chart = next(downloads_root().rglob(next(name for name in names if name.endswith(".html"))))
        opened = page.context.new_page()
        opened.goto(chart.as_uri())
        expect(opened.locator("h1")).to_contain_text(typed[:59])
        assert opened.locator("h1 b, h1 img").count() == 0 and opened.evaluate("window.tabedInjected") is None
        opened.close()

    @pytest.mark.parametrize("width", [1400, 390])
    def test_a_clicked_draft_says_why_and_every_control_speaks_plainly(self, page, chart_png, width):
        """A draft's detail comes by hover, click or tap; a click keeps it in view at the screen's bottom. A
        rejected draft's detail gives the target's own top tokens and the test it failed, a discarded one
        says it was never tested; rejected drafts keep the spaces they were drafted with; every control's label
        is the page's own words (`controls.LABELS`), never a name from the code."""
        page.set_viewport_size({"width": width, "height": 1000})
        open_settings(page)
        page.locator("#settings-adaptive input").uncheck()  # always γ drafts: some come after a rejection
        ask(page, chart_png, "w1 w2 w3")
        _struck_drafts_above_whole_words(page)  # (here a block's struck drafts are several, wider than its token)
        answer, detail = page.locator("#tabed-answer"), page.locator("#token-detail")
        answer.locator(".tk-accepted").first.hover()  # the pointer over a token says as much as a tap
        expect(detail).to_contain_text("kept: the target's top-1 is")
        page.set_viewport_size({"width": width, "height": 400})  # a short screen: the detail line is further down
        answer.locator(".tk-rejected").first.click()
        expect(detail).to_contain_text("rejected: the target's top-1 is")
        box = detail.bounding_box()  # yet in view, at the bottom of the screen, wherever the answer is scrolled
        assert 0 <= box["y"] and box["y"] + box["height"] <= 400, box
        page.set_viewport_size({"width": width, "height": 1000})
        expect(detail).to_contain_text("the target's top-3: ")
        expect(detail).to_contain_text("this draft: target p=")
        discarded = answer.locator(".tk-discarded").first
        discarded.locator("xpath=ancestor::span[@class='tk-fix']").hover()  # its drafts show whole
        discarded.click()
        expect(detail).to_contain_text("discarded, never tested")
        last = answer.locator(".tk-rejected").last  # a click steps the stepper to its block (not the first)
        block = last.get_attribute("data-block")
        assert int(block) > 0
        last.click()
        expect(page.locator("#step-view")).to_contain_text(f"Block {block} of blocks 0–")
        expect(detail).to_contain_text(f"Step through a block, below, now shows block {block}.")
        assert not re.search(r"w\d+w\d+", answer.inner_text())  # every drafted word apart, rejected ones too
        settings = page.locator("#settings")
        shown = [label.strip() for label in settings.locator("label > span:first-child, .label-text, "
                                                               "[data-testid=block-info]").all_inner_texts()]
        named = {label for label in shown if label}
        assert named and named <= set(LABELS.values()) | {"Settings"}, named - set(LABELS.values())
        assert not re.search(r"\b[A-Z][a-z]+[A-Z][a-z]+", settings.inner_text())  # no CamelCase name from the code
        rules = settings.locator("#settings-rule label")  # each weight rule's phrase whole, at both widths
        assert rules.count() == 4 and rules.evaluate_all("cs => cs.every(c => c.scrollWidth <= c.clientWidth + 1)")
        expect(rules.first).to_contain_text("w-grid: the weighting (in steps of 0.1) whose top-1 matched the target")

    def test_a_tapped_token_keeps_its_own_detail_on_a_phone(self, phone, chart_png):
        """A tap fills the detail line and keeps it at the screen's bottom, and steps the stepper to the token's
        block; the page moving under the finger then (a mouse event a phone makes after the tap) never puts
        another token's detail there."""
        ask(phone, chart_png, "w1 w2 w3")
        detail = phone.locator("#token-detail")
        tokens = phone.locator("#tabed-answer .tk")
        count = min(tokens.count(), 12)
        for index in range(count):
            token, other = tokens.nth(index), tokens.nth((index + 1) % count)
            other.scroll_into_view_if_needed()
            box = other.bounding_box()  # where the last touch was (a phone's mouse stays there)
            phone.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            token.scroll_into_view_if_needed()
            token.tap()
            phone.wait_for_timeout(150)  # for what the page does after a tap
            text = token.text_content()  # as the stepper shows it: trimmed, a blank token's ␣ drawn
            shown = text.strip() or text.translate({32: "\u2423", 10: "\u21b5", 9: "\u21e5"})
            expect(detail).to_contain_text(f"\u201c{shown}\u201d: {token.get_attribute('title')}")
            # and the stepper shows its block
            expect(phone.locator("#step-view")).to_contain_text(f"Block {token.get_attribute('data-block')} of")

    def test_a_refused_request_leaves_the_page_as_it_was(self, page, chart_png):
        ask(page, chart_png, "w1 w2")
        rows = page.locator("#blocks .body-cell").count()
        page.locator("#prompt textarea").fill("w1 " * 1100)
        page.locator("#run").click()
        expect(page.locator("#status")).to_contain_text("Error: the prompt is", timeout=60_000)
        expect(page.locator("#status")).to_contain_text("context")
        _as_it_was(page, rows)

    @pytest.mark.parametrize("width", [1400, 390])
    def test_bad_values_typed_on_the_page_are_named_and_change_nothing_else(self, page, chart_png, width):
        """A seed past 64 bits and a negative history window: the status names the field, what was wrong and
        what it takes; the answer, charts, table, downloads and conversation stay, with no error badge. A
        slider's box typed past its range is put back by the browser, and the status says to what."""
        page.set_viewport_size({"width": width, "height": 1300})
        open_settings(page)  # before the run: opened after it, the boxes are made while the page settles
        ask(page, chart_png, "w1 w2")
        rows = page.locator("#blocks .body-cell").count()
        for label, typed, said in (("seed", "100000000000000000000", "seed must be a whole number from 0 to "
                                    "4294967295; got 100000000000000000000"),
                                   ("history window", "-5", "history window must be a whole number from 0 to "
                                    "100000 (0 keeps every position); got -5")):
            box = page.locator("#settings").get_by_label(label, exact=False).first
            type_into(box, typed)
            page.locator("#run").click()
            expect(page.locator("#status")).to_contain_text(said, timeout=60_000)
            _as_it_was(page, rows)
            type_into(box, "0")
        for elem_id, typed, said in (("settings-gamma", "0", "γ takes 1 to 20: 0 was set to 1"),
                                     ("settings-max-new-tokens", "99999", "max new tokens takes 1 to 1024: 99999 "
                                      "was set to 1024")):
            box = page.locator(f"#{elem_id} input[type=number]")
            box.fill(typed)
            box.press("Enter")
            expect(page.locator("#status")).to_contain_text(said)
            expect(page.locator(f"#{elem_id} input[type=range]")).to_have_value(said.rsplit(" ", 1)[1])
        _as_it_was(page, rows)

    @pytest.mark.parametrize("width", [1400, 390])
    def test_a_single_method_run_never_says_tabed(self, page, width):
        """Its final page: the answer, the metrics, the status, the notes and the chart name M alone (every
        frame of such a run is held to it in test_app, on the handler's yields); the weight rule, TABED's own, is
        off while a single method is chosen."""
        page.set_viewport_size({"width": width, "height": 1300})
        open_settings(page)
        page.locator("#settings").get_by_label("single method").check()
        # the default ticks M and T: choosing one method keeps the first, so that Run works at once (it said
        # "single-method drafting uses one method; 2 are ticked" to a held-out trial)
        expect(page.locator("#settings").get_by_label("T: ")).not_to_be_checked()
        expect(page.locator("#settings").get_by_label("M: ")).to_be_checked()
        expect(page.locator("#settings")).to_contain_text("single method: the first ticked method drafts alone")
        rule = page.locator("#settings-rule input").first  # TABED's own: off while nothing learns weights
        expect(rule).to_be_disabled()
        page.locator("#settings").get_by_label("TABED (adaptive weights)").check()
        expect(rule).to_be_enabled()
        page.locator("#settings").get_by_label("single method").check()
        expect(rule).to_be_disabled()
        ask(page, None, "w1 w2")
        expect(page.locator("#tabed-answer")).to_contain_text("Answer (M alone)")
        expect(metrics_table(page)).to_contain_text("M alone")
        expect(metrics_table(page)).not_to_contain_text("TABED")
        expect(page.locator("#status")).not_to_contain_text("TABED")
        unfolded(page, "timing")
        unfolded(page, "weights")
        expect(page.locator("#timing-note")).to_contain_text("M alone runs first")  # the notes follow the mode
        expect(page.locator("#timing-note")).not_to_contain_text("TABED")
        expect(page.locator("#weights-note")).to_contain_text("there was no ensemble, so there is no")
        chart = page.locator("#weights-plot")
        expect(chart.locator(".gtitle")).to_have_text("M alone: no ensemble, no weights")  # no flat weight line
        expect(chart.locator(".legendtext")).to_have_text(["accepted drafts"])
        page.locator("#settings").get_by_label(MODES[0]).check()  # back to an ensemble: two methods again
        expect(page.locator("#settings").get_by_label("T: ")).to_be_checked()

    def test_the_ensemble_picked_last_sets_the_methods_while_the_last_pick_is_on_its_way(self, page, monkeypatch):
        """Single method, then TABED, then single method again while TABED's ticked methods are still on their
        way (each pick's take 1.5 s to come back here, as on a busy server; the weight rule's switch, a request
        of its own, is back at once): the methods follow the last pick, M alone, and Run works. (Once the last
        pick was dropped, Gradio's default for an input event: T stayed ticked and Run said "single-method
        drafting uses one method; 2 are ticked", seen in a full run.)"""
        picked, answered = app.methods_for_mode, []

        def slowly(*args):
            time.sleep(1.5)
            answered.append(args)
            return picked(*args)

        monkeypatch.setattr(app, "methods_for_mode", slowly)
        open_settings(page)
        settings, rule = page.locator("#settings"), page.locator("#settings-rule input").first
        settings.get_by_label("single method").check()
        expect(settings.get_by_label("T: ")).not_to_be_checked()
        settings.get_by_label("TABED (adaptive weights)").check()
        expect(rule).to_be_enabled()  # TABED picked; its methods not back yet
        settings.get_by_label("single method").check()
        for _ in range(100):  # until the server has answered every pick (the old code answered two)
            if len(answered) == 3:
                break
            page.wait_for_timeout(200)
        expect(settings.get_by_label("T: ")).not_to_be_checked()
        expect(settings.get_by_label("M: ")).to_be_checked()
        ask(page, None, "w1 w2")
        expect(page.locator("#status")).not_to_contain_text("ticked")

    @pytest.mark.parametrize("width", [1400, 390])
    def test_run_pressed_during_a_run_says_the_new_run_waits_then_runs_it(self, browser, tiny_server, chart_png,
                                                                         width, long_answers):
        """Run pressed again while plain decoding runs (paced to take seconds): the running run's status says, in
        view, that the new run waits behind it; the new run then runs, and its status no longer says so."""
        long_answers()  # 96 tokens a side
        with _paced_plain_decoding(0.05), screen(browser, tiny_server, width, 1300) as page:
            page.locator("#prompt textarea").fill("w1 w2 w3")
            page.locator("#run").click()
            expect(page.locator("#status")).to_contain_text("plain decoding (the target alone)…")
            page.locator("#run").click()
            queued = page.locator("#status .tabed-line").filter(has_text=app.QUEUED)
            expect(queued).to_be_visible()
            expect(queued).to_be_in_viewport()
            expect(page.locator("#status")).to_contain_text("plain decoding (the target alone)…")  # the first run's
            finished(page, 2)
            expect(page.locator("#status")).not_to_contain_text(app.QUEUED)
            no_error_badge(page)

    def test_token_trees_are_drawn_block_by_block(self, page, chart_png):
        expect(page.locator("#trees-plot")).to_be_visible()  # the default hedges the first block
        open_settings(page)
        page.locator("#settings-hedge-first input[type=checkbox]").uncheck()
        expect(page.locator("#trees-plot")).to_be_hidden()  # chains only: no empty chart on the page
        set_slider(page, "settings-tree-width", 3)
        expect(page.locator("#trees-plot")).to_be_visible()
        ask(page, chart_png, "w1 w2 w3")
        trees = page.locator("#trees-plot")
        expect(trees.locator(".js-plotly-plot")).to_have_count(1)
        expect(trees.locator(".ytick text").first).to_have_text(re.compile(r"block \d+"))
        expect(trees.locator(".scatterlayer .point").nth(4)).to_be_attached()  # five nodes or more, as drawn
        expect(page.locator("#blocks")).to_contain_text(" nodes")
        trees.screenshot(path=str(SCREENSHOTS / "trees.png"))


    @pytest.mark.parametrize("width", [1400, 390])
    def test_the_examples_read_apart_and_fill_the_question(self, page, width):
        """The examples' headers side by side, each whole; every example's pictures inside their own cell,
        clear of the prompt's (three pictures wrap on a phone); a click fills the question."""
        page.set_viewport_size({"width": width, "height": 900})
        examples = page.locator("#examples")
        examples.scroll_into_view_if_needed()
        headers = [examples.locator("th").nth(i).bounding_box() for i in range(2)]
        assert headers[0]["x"] + headers[0]["width"] <= headers[1]["x"] + 1, headers  # apart, not over each other
        assert examples.locator("th").evaluate_all("cells => cells.every(c => c.scrollWidth <= c.clientWidth)")
        rows = examples.locator("tbody tr")
        for row in range(rows.count()):
            cell = rows.nth(row).locator("td").first.bounding_box()
            for picture in rows.nth(row).locator("td").first.locator("img").all():
                box = picture.bounding_box()
                assert box["x"] >= cell["x"] - 1 and box["x"] + box["width"] <= cell["x"] + cell["width"] + 1, row
        example = page.locator('#examples [data-testid="dataset-cell-0-1"]')
        box = example.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
        example.click()
        expect(page.locator("#prompt textarea")).to_have_value(re.compile(r"\w+ \w+"))
        expect(page.locator("#image img").first).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_kept_paths_words_in_the_trees_chart_read_apart(browser):
    """On a page of its own, plotly's own drawing of the trees chart: four blocks whose kept paths are words as
    long as a real answer's, each with branches the target rejected, in a chart as wide as the answer's column
    at 1400 px and as a 390 px phone: no two words overlap, and each is inside the chart."""
    words = ["Additionally", "between", "shortest", "tallest", "because", "compared", "everything", "oranges",
             "standing", "colours", "together", "measured"]
    tokenizer = word_tokenizer(words)
    ids = tokenizer.convert_tokens_to_ids(words)
    blocks = []
    for index in range(4):  # nine kept deep, and a branch the target rejected beside each kept word
        path = [ids[(index * 3 + depth) % len(ids)] for depth in range(9)]
        tree, parent = [], -1
        for depth, token in enumerate(path):
            tree.append(TreeNode(ids[(depth * 5 + 1) % len(ids)], parent, "T", False, 0.3, 0.1))
            tree.append(TreeNode(token, parent, "M", True, 0.5, 0.5))
            parent = len(tree) - 1
        blocks.append(hand_block(path, 9, ids[0], tree, index=index))
    figure = render.trees_figure(tokenizer, blocks, 2)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        for width in (820, 370):  # the answer's column at 1400 px, a phone's
            page.set_content(f'<div id="chart" style="width:{width}px">'
                             f'{figure.to_html(include_plotlyjs=True, full_html=False)}</div>')
            page.locator("#chart .scatterlayer .textpoint text").first.wait_for()
            _labels_apart(page.locator("#chart"))
    finally:
        context.close()


def _labels_apart(chart) -> None:
    """No two of a chart's node labels overlap (a pixel of antialiasing allowed), and each is inside it."""
    boxes = chart.locator(".scatterlayer .textpoint text").evaluate_all(
        "texts => texts.filter(t => t.textContent.trim()).map(t => {"
        " const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.top, r.right, r.bottom]; })")
    assert len(boxes) >= 3
    frame = chart.bounding_box()
    for index, (word, left, top, right, bottom) in enumerate(boxes):
        assert frame["x"] <= left and right <= frame["x"] + frame["width"], word
        for other, o_left, o_top, o_right, o_bottom in boxes[index + 1:]:
            apart = right <= o_left + 1 or o_right <= left + 1 or bottom <= o_top + 1 or o_bottom <= top + 1
            assert apart, (word, other, (left, top, right, bottom), (o_left, o_top, o_right, o_bottom))


def _as_it_was(page, rows: int) -> None:
    """The last run's answer, charts, block table, downloads and conversation, still there; no error badge."""
    expect(page.locator("#weights-plot .js-plotly-plot")).to_have_count(1)
    expect(page.locator("#downloads a")).to_have_count(2)
    expect(metrics_table(page)).to_contain_text("block efficiency")
    expect(page.locator("#tabed-answer .tk").first).to_be_visible()
    expect(page.locator("#chat")).to_contain_text("w1 w2")
    assert page.locator("#blocks .body-cell").count() == rows > 0
    no_error_badge(page)


def _leading_columns_in_view(page) -> None:
    """The block table's first six columns, headers and cells, inside its box together; the others scroll,
    and its label says so."""
    table = page.locator("#blocks").bounding_box()
    for column in range(6):
        for cell in (f'[data-testid="header-{column}"]', f'[data-testid="cell-0-{column}"]'):
            box = page.locator(f"#blocks {cell}").bounding_box()
            assert table["x"] <= box["x"] and box["x"] + box["width"] <= table["x"] + table["width"] + 1, (cell, box)
    viewport = page.locator("#blocks .virtual-table-viewport")
    assert viewport.evaluate("v => v.scrollWidth > v.clientWidth")  # (the method columns, then the times)
    label = page.locator("#blocks .header-row .label p")
    said = label.evaluate("p => getComputedStyle(p, '::after').content")
    assert "scrolls sideways: each method's own draft, then the times" in said, said
    box = label.bounding_box()
    assert table["x"] <= box["x"] and box["x"] + box["width"] <= table["x"] + table["width"] + 1, box


WORDS_BROKEN_JS = """cells => cells.flatMap(cell => {
  const broken = [], walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.textContent.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const lines = new Set([...range.getClientRects()].map(rect => Math.round(rect.top)));
      if (lines.size > 1) broken.push(match[0]);
    }
  }
  return broken;
})"""


def _words_whole(page, selector: str) -> None:
    """No word of these cells is split over two lines (as "blo ck" or "(measur ed" were on a phone)."""
    assert page.locator(selector).evaluate_all(WORDS_BROKEN_JS) == []


def _chart_legible(page) -> None:
    """The weights chart's block numbers do not touch, and its legend sits above the plotting area."""
    chart = page.locator("#weights-plot")
    chart.scroll_into_view_if_needed()
    expect(chart.locator(".legend")).to_be_attached()  # drawn (plotly draws after the frame arrives)
    expect(chart.locator(".xtick text").nth(1)).to_be_attached()
    ticks = sorted((box["x"], box["x"] + box["width"]) for box in
                   (tick.bounding_box() for tick in chart.locator(".xtick text").all()) if box)
    assert len(ticks) >= 2 and all(right < left for (_, right), (left, _) in zip(ticks, ticks[1:], strict=False))
    legend, area = chart.locator(".legend").bounding_box(), chart.locator(".bglayer .bg").first.bounding_box()
    assert legend["y"] + legend["height"] <= area["y"] + 1, (legend, area)
    label = chart.locator('[data-testid="block-label"]').bounding_box()  # and below the chart's own label
    assert label["y"] + label["height"] <= legend["y"] + 1, (label, legend)


STRUCK_PLACES = """answer => {
    const kept = [...answer.querySelectorAll('.tk:not(.tk-rejected):not(.tk-discarded)')];
    const box = answer.getBoundingClientRect();
    return kept.flatMap((token, i) => {
        if (!token.classList.contains('tk-corrected') || i === 0) return [];
        const own = token.getBoundingClientRect(), before = kept[i - 1].getBoundingClientRect();
        const drafts = token.closest('.tk-fix')?.querySelector('.tk-drafts')?.getBoundingClientRect();
        const next = kept[i + 1]?.getBoundingClientRect();
        const apart = (a, b) => b && Math.abs(a.top - b.top) < 2 ? Math.abs(b.left - a.right) : 0;  // on one line
        const past = drafts && document.elementFromPoint(own.right + 3, (drafts.top + drafts.bottom) / 2);
        return [{text: token.innerText, gap: Math.max(apart(before, own), apart(own, next)),
                 above: drafts ? drafts.bottom <= own.top + 0.3 * own.height && drafts.top >= box.top : false,
                 spills: Boolean(past && token.closest('.tk-fix').querySelector('.tk-drafts').contains(past))}];
    });
}"""


def _struck_drafts_above_whole_words(page) -> None:
    """Each target's token at a rejection follows the kept token before it on its line with no gap, its
    struck drafts set above it inside the answer's box: a word the drafts split reads whole ("Just", not
    "J~~le~~ust", which a trial found garbled; nor "Ju  st", drafts wider than their token pushing it apart);
    and its drafts end where it does (run on, a trial saw them run into the next ones: "TЋi hig wst")."""
    page.mouse.move(0, 0)  # (under the pointer, a token's drafts show whole)
    page.locator("#tabed-answer").scroll_into_view_if_needed()
    places = page.locator("#tabed-answer").evaluate(STRUCK_PLACES)
    assert places and all(abs(place["gap"]) < 1.5 and place["above"] for place in places), places
    assert not any(place["spills"] for place in places), places


ROW_OF_EACH_TOKEN = """answer => [...answer.querySelectorAll('.tk:not(.tk-rejected):not(.tk-discarded)')]
    .map(token => [token.textContent, Math.round(token.getBoundingClientRect().top)])"""


def test_a_word_with_struck_drafts_in_it_never_breaks_over_two_lines(browser):
    """On a page of its own, the app's styles: "Additionally," with 'le' struck inside it, after words that
    fill the line, at every width from 120 to 400 px (a line ends just before, inside and after the word):
    its pieces stay on one line ("Add / itionally" was seen on a phone: Chromium breaks at the drafts' box)."""
    tokenizer, blocks = a_word_split_by_a_rejection()
    stream = render.TokenStream(tokenizer)
    for block in blocks:
        stream.block(block)
    context = browser.new_context(viewport={"width": 420, "height": 400})
    try:
        page = context.new_page()
        split = []
        for width in range(120, 401, 3):
            page.set_content(f'<style>{app.texts.CSS}</style><div id="tabed-answer" style="width:{width}px">'
                             f'<span class="tk">Some words here and there</span><span class="tk"> </span>'
                             f'{stream.html}</div>')
            rows = dict(page.locator("#tabed-answer").evaluate(ROW_OF_EACH_TOKEN))
            if len({rows[piece] for piece in ("Add", "it", "ionally", ",")}) > 1:
                split.append((width, rows))
        assert not split, split
    finally:
        context.close()


def _rejected_drafts_hide_and_count(page) -> None:
    answer, switch = page.locator("#tabed-answer"), page.locator("#show-rejected input")
    rejected = answer.locator(".tk-rejected, .tk-discarded").count()
    assert rejected > 0
    switch.uncheck()
    expect(answer.locator(".tk-rejected").first).to_be_hidden()
    hidden = f"{rejected} draft{'s' * (rejected > 1)} not kept, hidden (rejected, or never tested after a rejection)"
    expect(answer.locator(".tabed-rejected-count")).to_have_text(hidden)
    switch.check()
    expect(answer.locator(".tk-rejected").first).to_be_visible()
    expect(answer.locator(".tabed-rejected-count")).to_be_hidden()


WEIGHTS = """() => document.querySelector('#weights-plot .js-plotly-plot')._fullData
    .filter(trace => trace.name.startsWith('weight of '))
    .map(trace => [trace.name.slice('weight of '.length), Array.from(trace.y)])"""


def _kept_tokens(page, elem_id: str) -> str:
    """An answer as the page shows it, struck-through rejected drafts left out."""
    return "".join(page.locator(f"#{elem_id} .tk:not(.tk-rejected):not(.tk-discarded)").all_inner_texts())


@pytest.mark.slow
def test_every_example_and_its_follow_up_on_the_bundled_pair_shows_moving_weights(browser):
    """No stand-in: the app loads the teaching pair itself, as on a fresh laptop. Each example, then its
    follow-up, as a person runs them: the page's weights chart has a point per block, at least five, and
    in at least three examples M's weight moves by 0.2 or more within one answer (with no picture M and T
    are one row, drawn as one line at weight 1); TABED's answer is the plain one; on the odd pictures T alone
    would have kept more drafts than M."""
    app.PAIRS.name = app.PAIRS.pair = None
    rows = json.loads((app.EXAMPLES / "examples.json").read_text())
    moved, shown = [], []
    with served_page(browser) as page:
        for index, row in enumerate(rows):
            page.locator("#new").click()  # its answer, not only an empty box, before an example fills the page:
            expect(page.locator("#status")).to_contain_text("Start a new conversation")  # else it may clear it
            expect(page.locator("#image img")).to_have_count(0)
            expect(page.locator("#prompt textarea")).to_have_value("")
            same_prompt_before = sum(other["prompt"] == row["prompt"] for other in rows[:index])  # told by pictures
            page.locator("#examples").get_by_text(row["prompt"], exact=True).nth(same_prompt_before).click()
            expect(page.locator("#prompt textarea")).to_have_value(row["prompt"])
            expect(page.locator("#image img")).to_have_count(len(row["images"]))
            for run, (button, prompt) in enumerate((("#run", row["prompt"]), ("#follow-up", row["follow_up"])), 1):
                if button == "#follow-up":
                    page.locator("#follow-up-examples").get_by_text(prompt, exact=True).first.click()
                    expect(page.locator("#prompt textarea")).to_have_value(prompt)
                page.locator(button).click()
                expect(page.locator("#chat")).to_contain_text(prompt, timeout=120_000)  # this run's, not the last
                # the session's runs count on across its conversations
                expect(verdict(page, 2 * index + run)).to_be_visible(timeout=120_000)
                expect(verdict(page, 2 * index + run)).to_have_attribute("title", re.compile(r"\bteaching on"))
                expect(metrics_table(page)).to_contain_text("if T alone had drafted")
                # the run's start cleared the chart; its final frame, with the verdict, draws this run's
                page.wait_for_function("() => document.querySelector('#weights-plot .js-plotly-plot') !== null",
                                       timeout=30_000)
                weights = dict(page.evaluate(WEIGHTS))
                if not row["images"]:  # M and T read the same text: one row, one line, nothing to learn
                    one_row = "M=T (one row: no picture)"
                    assert list(weights) == [one_row] and len(weights[one_row]) >= 5, (prompt, weights)
                    assert set(weights[one_row]) == {1.0}, (prompt, weights)
                else:
                    assert set(weights) == {"M", "T"} and len(weights["M"]) >= 5, (prompt, weights)
                    moved.append(max(weights["M"]) - min(weights["M"]))
                    shown.append(prompt)
                assert _kept_tokens(page, "tabed-answer") == _kept_tokens(page, "plain-answer"), prompt
                if row["scenario"] == "odd" and button == "#run":
                    metrics = metrics_table(page).inner_text()
                    alone = {m: float(re.search(rf"if {m} alone had drafted\s+([\d.]+)", metrics)[1]) for m in "MT"}
                    assert alone["M"] < alone["T"], alone  # M's drafts miss here
            if row is rows[0]:
                SCREENSHOTS.mkdir(exist_ok=True)
                page.screenshot(path=str(SCREENSHOTS / "teaching.png"), full_page=True)
    print("M's weight moved within each answer by:", list(zip(shown, moved, strict=True)))
    assert sum(move >= 0.2 for move in moved) >= 3, list(zip(shown, moved, strict=True))


WATCH_STATUS = """() => {
    const status = document.querySelector('#status');
    window.tabedStatuses = [];
    if (window.tabedWatch) window.tabedWatch.disconnect();
    window.tabedWatch = new MutationObserver(() => window.tabedStatuses.push(status.innerText));
    window.tabedWatch.observe(status, {subtree: true, childList: true, characterData: true});
}"""


def _statuses_once_settled(page, quiet_s: float = 1.0, bound_s: float = 30.0) -> list[str]:
    """The statuses the watcher saw, once none has come for `quiet_s` (or `bound_s` have passed)."""
    seen, since, start = -1, time.monotonic(), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() - start < bound_s:
        count = page.evaluate("window.tabedStatuses.length")
        if count != seen:
            seen, since = count, time.monotonic()
        time.sleep(0.05)
    return page.evaluate("window.tabedStatuses")


def _stop_and_check(page, where: str, moments: list[float]) -> None:
    """Press Stop; the page must say so (within a second on a quiet machine, printed at the end; bounded at
    30 s so that a busy machine fails only a Stop that never lands), with no error anywhere, and every
    status it shows from the click on (each change, seen by a MutationObserver) until the run's last frame
    must be a stopped run's, never a verdict or a speedup, not even for one frame."""
    _check_stopped(page, where, moments, _press_stop(page))


def _press_stop(page) -> float:
    """Watch the status from now on, press Stop; when it was pressed."""
    page.evaluate(WATCH_STATUS)
    clicked = time.monotonic()
    page.locator("#stop").click(timeout=60_000)  # a bound, not a speed: a busy browser can take seconds to click
    return clicked


def _check_stopped(page, where: str, moments: list[float], clicked: float) -> None:
    target = page.locator("#race-view") if where == "race" else page.locator("#status")
    expect(target).to_contain_text("Stopped", timeout=30_000)
    moments.append(time.monotonic() - clicked)
    while workers_alive() and time.monotonic() - clicked < 30:
        time.sleep(0.02)
    assert workers_alive() == 0, f"Stop ({where}) did not end the decoding thread"
    assert page.get_by_text("Error", exact=True).count() == 0, f"an Error badge after Stop ({where})"
    shown = _statuses_once_settled(page)  # the run's last frames (downloads, charts) come after "Stopped"
    assert not any(text.startswith("\u2713") or "×" in text for text in shown), (where, shown)
    if where == "tabed":
        expect(page.locator("#tabed-answer .tk").first).to_be_visible()  # the partial answer stays
        expect(page.locator("#tabed-answer")).to_contain_text("stopped here")
    if where == "plain":
        expect(page.locator("#plain-answer")).to_contain_text("stopped here")
        expect(page.locator("#tabed-answer .tk").first).to_be_visible()
        expect(page.locator("#status")).to_contain_text("TABED's answer is complete")
        expect(page.locator("#chat")).to_contain_text("w1 w2 w3")  # so it joins the conversation
    elif where != "race":  # (the race replays a finished run, which is in the conversation)
        expect(page.locator("#chat")).not_to_contain_text("w1 w2 w3")  # no half answer in the conversation


def _stop_races(page, rng: random.Random, moments: list[float], monkeypatch, landed_wanted: int = 2) -> None:
    """Replay the race and Stop it, until two Stops reached the server before their race had made its last
    frame; each of those must show "Stopped" (`_check_stopped`). A busy machine's browser can run seconds
    behind the frames it is sent, so that its Stop reaches the server after the race has ended: such a race
    is replayed again, at most four times."""
    stops: list[float] = []  # when each Stop reached the server
    races: list[list[float]] = []  # per race, when the server had made each of its frames
    monkeypatch.setattr(app.STOPS, "stop", lambda session, stop=app.STOPS.stop: (stops.append(time.monotonic()),
                                                                                  stop(session)))

    def timed(conversation, flag, pace, frames=app.race_frames):
        races.append([])
        made = frames(conversation, flag, pace)
        for frame in made:
            races[-1].append(time.monotonic())
            yield frame
    monkeypatch.setattr(app, "race_frames", timed)
    late = 0
    while len(moments) < 8 + landed_wanted:
        page.locator("#race").click()
        # the new race's own frames (the last one's "Stopped" gone): a Stop before it began would stop nothing
        expect(page.locator("#race-view")).not_to_contain_text("Stopped", timeout=30_000)
        expect(page.locator("#race-view")).to_contain_text("TABED", timeout=30_000)
        time.sleep(rng.uniform(0.1, 0.5))
        asked = len(stops)
        clicked = _press_stop(page)
        while (len(stops) == asked or app.STOPS.flags) and time.monotonic() - clicked < 60:
            time.sleep(0.02)  # until the Stop has reached the server and the race has ended there
        assert len(stops) > asked and not app.STOPS.flags, "Stop never reached the server, or the race never ended"
        if stops[asked] < races[-1][-1]:  # before the race's last frame: it saw the Stop, the page must say so
            _check_stopped(page, "race", moments, clicked)
            continue
        late += 1
        assert late <= 4, "in four races the Stop reached the server after the race had ended"
        print("a Stop reached the server after its race had ended: the race replayed again")
        time.sleep(app.STOPS.EARLY_S)  # a Stop that finds nothing running stops what begins within this (by design)


@pytest.fixture
def long_winded_pair():
    """The bundled pair with an end-of-sequence token it never writes: every answer runs to max new
    tokens (seconds on this CPU), so that Stop can land anywhere."""
    pair = load_preset("teaching", device="cpu")
    pair.target.generation_config.eos_token_id = [len(pair.tokenizer) + 1000]
    return pair


@contextlib.contextmanager
def _paced_plain_decoding(step_s: float = 0.02):
    """Within: plain decoding takes at least `step_s` a token (256 tokens took about a second on a fast CI
    machine, over before a Stop clicked up to 0.8 s after its status could land). Its Stop is the real one:
    the decoding's own cancel check, between tokens."""
    def paced(*args, generate=worker.autoregressive_generate, **kwargs):
        for event in generate(*args, **kwargs):
            yield event
            time.sleep(step_s)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(worker, "autoregressive_generate", paced)
        yield


@pytest.mark.slow
def test_ten_stops_in_a_row_each_shown_on_the_page(browser, long_winded_pair, monkeypatch):
    """Long sampled answers, Stop at random moments: before the first block, during TABED, during plain
    decoding and during the replay race; then Run and Follow-up still work."""
    rng = random.Random(12)
    moments: list[float] = []
    with serving(long_winded_pair), served_page(browser) as page:
        page.locator("#settings").get_by_text("Settings").first.click()
        set_slider(page, "settings-max-new-tokens", 1024)  # long: a Stop slowed by a busy machine lands in TABED
        set_slider(page, "settings-temperature", 2)
        page.locator("#prompt textarea").fill("w1 w2 w3 w4 w5 w6 w7 w8")
        page.locator("#run").click()
        _stop_and_check(page, "first", moments)  # at once: before (or at) the first block
        for where in ["tabed"] * 4 + ["plain"] * 3:
            paced = _paced_plain_decoding() if where == "plain" else contextlib.nullcontext()
            if where == "plain":  # TABED's side decodes first, to the end: 256 tokens take a quarter of 1024
                set_slider(page, "settings-max-new-tokens", 256)
            with paced:
                page.locator("#run").click()
                phase = "TABED decoding…" if where == "tabed" else "plain decoding (the target alone)…"
                expect(page.locator("#status")).to_contain_text(phase, timeout=60_000)
                time.sleep(rng.uniform(0.0, 0.8))
                _stop_and_check(page, where, moments)
        set_slider(page, "settings-max-new-tokens", 320)  # a race of about 20 s: a busy machine's Stop lands in it
        page.locator("#run").click()
        expect(page.locator("#status .tabed-verdict")).to_be_visible(timeout=120_000)
        # the run's last frames (charts, downloads) drawn first: a busy browser drawing them clicks Stop late
        expect(page.locator("#downloads a")).to_have_count(2, timeout=60_000)
        page.evaluate(WATCH_STATUS)
        _statuses_once_settled(page)
        _stop_races(page, rng, moments, monkeypatch)
        assert len(moments) == 10
        print("seconds from Stop to 'Stopped' on the page:", " ".join(f"{m:.2f}" for m in moments))
        set_slider(page, "settings-temperature", 0)
        page.locator("#prompt textarea").fill("Add 5 to that number.")
        page.locator("#follow-up").click()
        expect(page.locator("#chat")).to_contain_text("Add 5 to that number.", timeout=120_000)
        expect(page.locator("#status .tabed-verdict")).to_be_visible()
