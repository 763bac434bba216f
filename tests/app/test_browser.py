"""The app in a real browser: start `streamlit run` headless on a loopback port, drive it with
Playwright in Debian's Chromium, and keep screenshots under `test-artifacts/`.

Skipped only when /usr/bin/chromium is absent outside CI; in CI (`CI` set) it always runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.io.scenario_io import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app" / "streamlit_app.py"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
START_TIMEOUT_S = 60
RUN_TIMEOUT_MS = 120_000
NUMBER = re.compile(r"\d")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists() and not os.environ.get("CI"),
        reason="Debian chromium is not installed (apt-get install chromium); runs always in CI",
    ),
]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"streamlit not healthy after {START_TIMEOUT_S} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true",
        "--server.port", str(port), "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
    ]  # fmt: skip
    with log.open("wb") as out:
        # own session: the server and any worker processes it spawns share one process group
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, proc, log)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright  # imported here: skipped runs need none

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _screenshot(page: object, name: str, tmp_path: Path) -> Path:
    """Full-height screenshot (Streamlit scrolls inside its main block, so grow the viewport)."""
    height = page.evaluate(  # type: ignore[attr-defined]
        "() => Math.max(...[...document.querySelectorAll('[data-testid=stMain], "
        "[data-testid=stAppViewContainer]')].map(e => e.scrollHeight), 1000)"
    )
    page.set_viewport_size({"width": 1600, "height": min(int(height) + 100, 12000)})  # type: ignore[attr-defined]
    page.wait_for_timeout(800)  # type: ignore[attr-defined]  # let Plotly re-lay out
    shot = tmp_path / name
    page.screenshot(path=str(shot))  # type: ignore[attr-defined]
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / name)
    return shot


def _idle(page: object) -> None:
    """Wait until the app runs no script (the app element's script state, which Streamlit sets
    as a run starts; its status widget shows only some time after)."""
    idle = page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]')  # type: ignore[attr-defined]
    idle.wait_for(timeout=60_000)


def _set_number(page: object, label: str, value: int, nth: int = 0) -> None:
    box = page.get_by_label(label, exact=True).nth(nth)  # type: ignore[attr-defined]
    box.wait_for(timeout=30_000)
    _idle(page)
    box.fill(str(value))
    box.press("Enter")


def _run_and_wait(page: object) -> float:
    """Click Run; seconds until all twelve metric cards and the charts heading are shown."""
    started = time.perf_counter()
    page.get_by_role("button", name="Run", exact=True).click()  # type: ignore[attr-defined]
    page.locator('[data-testid="stMetric"]').nth(11).wait_for(timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    page.get_by_text("Latency distributions").wait_for(timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    return time.perf_counter() - started


def test_whatif_change_run_compare(app_url: str, browser: object, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1600, "height": 1000})  # type: ignore[attr-defined]
    page.goto(app_url, timeout=60_000)
    page.get_by_text("Press Run to simulate").wait_for(timeout=60_000)
    # the worker processes warm up (import the simulator) while a person reads the form; the
    # figure below is the run itself, not the app's start-up
    page.wait_for_timeout(4000)  # type: ignore[attr-defined]
    default_s = _run_and_wait(page)  # the default comparison, TP8 vs DP8 + EP8
    default_caption = page.get_by_text(re.compile(r"^scenario [0-9a-f]{12} ")).first.inner_text()

    # change deployment 1 from TP8 to attention TP4 x DP2 (MoE stays TP8) and run again
    _set_number(page, "attn tp", 4, nth=0)
    expect(page.get_by_label("attn tp", exact=True).nth(0)).to_have_value("4")
    page.get_by_text("Press Run to simulate").wait_for(timeout=60_000)
    changed_s = _run_and_wait(page)
    caption = page.get_by_text(re.compile(r"^scenario [0-9a-f]{12} ")).first.inner_text()

    cards = page.locator('[data-testid="stMetric"]').all_inner_texts()
    assert len(cards) == 12  # six cards for each of two deployments
    assert all(NUMBER.search(c) for c in cards), cards
    dup = [c for c in cards if c.startswith("KV dup factor")]
    assert [[ln for ln in c.splitlines() if ln.strip()][1] for c in dup] == ["4", "1"], dup
    assert "vs baseline" in " ".join(cards)

    charts = page.locator('[data-testid="stPlotlyChart"]')
    charts.nth(3).wait_for(timeout=30_000)
    assert charts.count() == 4  # memory, latency CDF, step breakdown, rank imbalance
    ticks = page.locator(".js-plotly-plot .xtick text").all_text_contents()
    assert any(NUMBER.search(t) for t in ticks), ticks

    with page.expect_download(timeout=30_000) as dl:
        page.get_by_role("button", name=re.compile("scenario YAML")).click()
    scenario = parse_scenario(Path(dl.value.path()).read_text())
    assert [d.attn_tp for d in scenario.deployments] == [4, 1]

    shot = _screenshot(page, "whatif.png", tmp_path)
    assert shot.stat().st_size > 50_000
    timing = {
        "default_click_to_cards_s": round(default_s, 2), "default_run": default_caption,
        "changed_click_to_cards_s": round(changed_s, 2), "changed_run": caption,
    }  # fmt: skip
    (ARTIFACTS / "whatif-timing.json").write_text(json.dumps(timing) + "\n")
    page.close()


def test_physics_page_renders_charts(app_url: str, browser: object, tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1600, "height": 1000})  # type: ignore[attr-defined]
    page.goto(f"{app_url}/?page=physics", timeout=60_000)
    page.get_by_text("DSA: sparse attention and its indexer").wait_for(timeout=60_000)
    charts = page.locator('[data-testid="stPlotlyChart"]')
    charts.nth(2).wait_for(timeout=30_000)
    values = page.locator('[data-testid="stMetricValue"]').all_inner_texts()
    assert any("FLOP/B" in v for v in values), values
    assert any(NUMBER.search(v) for v in values)
    _screenshot(page, "physics.png", tmp_path)
    page.close()


def test_plan_page_draws_the_pareto_chart_and_a_launch_command(
    app_url: str, browser: object, tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 1440, "height": 1000})  # type: ignore[attr-defined]
    page.goto(f"{app_url}/?page=plan", timeout=60_000)
    page.get_by_text("Press Plan to search").wait_for(timeout=60_000)
    page.get_by_role("button", name="Plan", exact=True).click()
    page.get_by_text("Launch commands").wait_for(timeout=RUN_TIMEOUT_MS)
    chart = page.locator('[data-testid="stPlotlyChart"]').first
    chart.wait_for(timeout=30_000)
    legend = page.locator(".js-plotly-plot .legendtext").all_text_contents()
    assert "Pareto frontier" in legend, legend
    block = page.locator('[data-testid="stCode"]', has_text="sglang.launch_server").first
    block.wait_for(timeout=30_000)  # code blocks fill in after the chart: wait for the text
    code = block.inner_text()
    assert "python -m sglang.launch_server" in code
    assert "--tp-size" in code
    _screenshot(page, "plan-page.png", tmp_path)
    page.close()


def test_whatif_inputs_survive_a_page_switch(app_url: str, browser: object) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1440, "height": 1000})  # type: ignore[attr-defined]
    page.goto(app_url, timeout=60_000)
    page.get_by_text("Press Run to simulate").wait_for(timeout=60_000)
    _set_number(page, "attn tp", 4)
    expect(page.get_by_label("attn tp", exact=True).nth(0)).to_have_value("4")
    # the box shows what was typed at once; the app holds it once the rerun Enter started has
    # run, so switch as a user does: once the card's layout line, drawn by that rerun, shows it
    page.get_by_text("8 GPUs: attn TP4 x DP2").wait_for(timeout=60_000)
    _idle(page)
    page.get_by_text("Physics", exact=True).click()
    page.get_by_text("DSA: sparse attention and its indexer").wait_for(timeout=60_000)
    page.get_by_text("What-if", exact=True).first.click()
    page.get_by_text("Press Run to simulate").wait_for(timeout=60_000)
    expect(page.get_by_label("attn tp", exact=True).nth(0)).to_have_value("4")
    page.close()
