"""The HTML reports in a real browser: headless Chromium (Debian's chromium and chromium-driver),
driven with selenium. Each page must load without a console error, draw one treemap element
per layer, zoom into a layer on click and back on Escape, and leave a screenshot in the test
artefacts (``$GPULINT_TEST_ARTIFACTS``, default build/test-artifacts/).

Chromium is started with no network at all (the flags below and a fresh profile): the pages
must not need one. Without chromium, chromedriver or selenium the tests skip, except under
GPULINT_REQUIRE_TOOLS=1 (CI), where they fail.

docs/images/image-report.png in the README is the podman fixture's screenshot from here
(``GPULINT_UPDATE_SCREENSHOTS=1`` writes it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import tools_required
from gpulint.cli import main
from test_html_report import MULTI, image_html
from test_image_podman import exported  # noqa: F401  (the podman-built fixture image)
from test_image_sources import CONFIG, HISTORY, LAYERS, make_layer, write_docker_archive

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("GPULINT_TEST_ARTIFACTS") or ROOT / "build" / "test-artifacts")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


@pytest.fixture
def browser(require_tool: Callable[[str], str], tmp_path: Path) -> Iterator[Any]:
    chromium = require_tool("chromium")
    chromedriver = require_tool("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        reason = "selenium is not installed (pip install -e '.[dev]')"
        if tools_required():
            pytest.fail(f"{reason}; GPULINT_REQUIRE_TOOLS=1 turns this skip into a failure")
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1300,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: Any, path: Path) -> None:
    driver.get(path.resolve().as_uri())
    assert driver.execute_script("return document.readyState") == "complete"


def console_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def screenshot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    assert driver.save_screenshot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    return path


def visible_view(driver: Any, img: int = 0) -> Any:
    views = [
        v
        for v in driver.find_elements("css selector", f'.tm[data-img="{img}"] svg.tm-view')
        if v.is_displayed()
    ]
    assert len(views) == 1
    return views[0]


def check_zoom(driver: Any, img: int, layers: int) -> None:
    """One element per layer at the top; a click on the biggest zooms into it, Escape comes back."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    root = visible_view(driver, img)
    assert "tm-root" in root.get_attribute("class")
    elements = root.find_elements("css selector", ":scope > g.tm-layer")
    assert len(elements) == layers
    biggest = max(elements, key=lambda e: e.size["width"] * e.size["height"])
    target = biggest.get_attribute("data-v")
    assert target
    ActionChains(driver).move_to_element(biggest).perform()
    tip = driver.find_element("id", "tip")
    assert tip.is_displayed() and "layer" in tip.text
    biggest.click()
    zoomed = visible_view(driver, img)
    assert zoomed.get_attribute("id") == target and zoomed.get_attribute("data-up") == f"v{img}-root"
    crumbs = driver.find_elements("css selector", f'.tm[data-img="{img}"] .crumbs button')
    assert [c.text for c in crumbs] == ["image", zoomed.get_attribute("data-title")]
    assert zoomed.find_elements("css selector", ":scope > g.tm-n")  # the layer's directories
    driver.find_element("tag name", "body").send_keys(Keys.ESCAPE)
    time.sleep(0.1)
    assert visible_view(driver, img).get_attribute("id") == f"v{img}-root"
    # a row of the layer table zooms too
    row = driver.find_element("css selector", f'#image-{img} table.layers tr[data-v="{target}"]')
    driver.execute_script("arguments[0].click()", row)
    assert visible_view(driver, img).get_attribute("id") == target
    crumbs = driver.find_elements("css selector", f'.tm[data-img="{img}"] .crumbs button')
    crumbs[0].click()
    assert visible_view(driver, img).get_attribute("id") == f"v{img}-root"


def test_image_report_in_chromium(browser: Any, tmp_path: Path) -> None:
    page = tmp_path / "image.html"
    page.write_text(image_html(write_docker_archive(tmp_path / "img.tar")), "utf-8")
    open_page(browser, page)
    check_zoom(browser, 0, len(LAYERS))
    assert console_errors(browser) == []
    screenshot(browser, "image-report-synthetic.png")


def test_podman_fixture_image_report_in_chromium(
    browser: Any,
    exported: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    from gpulint.image.sources import open_image

    archive = Path(exported["docker-archive"].split(":", 1)[1])
    with open_image(f"docker-archive:{archive}") as image:
        layers = len(image.data.layers)
    page = tmp_path / "podman.html"
    with pytest.raises(SystemExit):
        main(["image", "--format", "html", "-o", str(page), "--weights-threshold", "1MB", str(archive)])
    open_page(browser, page)
    check_zoom(browser, 0, layers)
    assert console_errors(browser) == []
    # the README's picture: the treemap with a tooltip, the legend and the savings
    tm = browser.find_element("css selector", ".tm-root")
    biggest = max(
        tm.find_elements("css selector", ":scope > g.tm-layer"),
        key=lambda e: e.size["width"] * e.size["height"],
    )
    from selenium.webdriver.common.action_chains import ActionChains

    inner = biggest.find_elements("css selector", "g[data-n]")
    ActionChains(browser).move_to_element(inner[0] if inner else biggest).perform()
    browser.set_window_size(1300, 1180)
    browser.execute_script("window.scrollTo(0, 0)")
    shot = screenshot(browser, "image-report.png")
    if os.environ.get("GPULINT_UPDATE_SCREENSHOTS") == "1":  # refresh the README's picture
        (ROOT / "docs" / "images" / "image-report.png").write_bytes(shot.read_bytes())


def test_comparison_in_chromium(browser: Any, tmp_path: Path) -> None:
    before = write_docker_archive(tmp_path / "before.tar")
    slim = make_layer([("usr/lib/x86_64-linux-gnu/libcudart.so.12", 400_000), ("app/serve.py", 2_000)])
    after = write_docker_archive(tmp_path / "after.tar", [slim], dict(CONFIG, history=[HISTORY[1]]))
    page = tmp_path / "compare.html"
    page.write_text(image_html(before, after), "utf-8")
    open_page(browser, page)
    assert len(browser.find_elements("css selector", "svg.tm-root")) == 2
    check_zoom(browser, 0, len(LAYERS))
    check_zoom(browser, 1, 1)
    assert console_errors(browser) == []
    screenshot(browser, "image-compare.png")


def test_lint_report_in_chromium(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Dockerfile").write_text(MULTI)
    with pytest.raises(SystemExit):
        main(["--no-config", "--format", "html", "-o", "lint.html", "Dockerfile"])
    open_page(browser, tmp_path / "lint.html")
    graph = browser.find_element("css selector", "svg.stage-graph")
    assert graph.is_displayed() and graph.size["width"] > 300
    assert len(graph.find_elements("css selector", "g.stage")) == 3
    errors = browser.find_elements("css selector", "tr.f-error")
    assert errors and all(e.is_displayed() for e in errors)
    browser.find_element("css selector", '.filters input[value="error"]').click()
    assert not any(e.is_displayed() for e in errors)
    browser.find_element("css selector", '.filters input[value="error"]').click()
    assert console_errors(browser) == []
    screenshot(browser, "lint-report.png")
