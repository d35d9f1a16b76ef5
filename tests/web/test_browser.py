"""The web UI in a real headless Chromium (Selenium + Debian's chromium-driver) against
``evs web`` started as a user starts it: a subprocess on a free loopback port.

Set ``EVS_WEB_SCREENSHOTS=DIR`` to save the screenshots used in docs/web.md.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from _extras import require_extra

require_extra("selenium", "dev")
require_extra("uvicorn", "web")

from _web_support import WAIT, Server, evs, web_server  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def _binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    message = (f"{' / '.join(names)} not found; install it with "
               "apt-get install -y chromium chromium-driver")
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture
def server(paused_demo: tuple[Path, str]) -> Iterator[Server]:
    db, _ = paused_demo
    with web_server(db) as running:
        yield running


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = _binary("chromium", "chromium-browser")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--window-size=1200,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(_binary("chromedriver")), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver: WebDriver, name: str) -> None:
    folder = os.environ.get("EVS_WEB_SCREENSHOTS")
    if folder:
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))


def _wait_text(driver: WebDriver, css: str, text: str) -> None:
    WebDriverWait(driver, WAIT).until(
        lambda d: any(text in e.text for e in d.find_elements(By.CSS_SELECTOR, css)))


def test_browser_session_pairs_calls_filters_and_shows_the_diff(
    server: Server, browser: WebDriver, paused_demo: tuple[Path, str]
) -> None:
    assert paused_demo[1]
    browser.get(server.sign_in_url)  # the printed URL: it lands on the sessions, signed in
    WebDriverWait(browser, WAIT).until(lambda d: d.current_url == server.url + "/")
    assert "writes allowed" in browser.find_element(By.TAG_NAME, "header").text
    _shot(browser, "sessions")
    browser.find_element(By.CSS_SELECTOR, "a.session-link").click()
    _wait_text(browser, "#seq-2 .call", "answered at #4")
    assert "confirm paid_forecast" in browser.find_element(By.ID, "seq-8").text
    _shot(browser, "session")
    browser.find_element(By.ID, "errors-only").click()
    browser.find_element(By.ID, "apply").click()
    WebDriverWait(browser, WAIT).until(lambda d: "errors=1" in d.current_url)
    rows = [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "li.row")]
    assert rows == ["seq-4", "seq-7"]
    browser.find_element(By.CSS_SELECTOR, "#seq-4 a.seq").click()
    _wait_text(browser, "#diff", "last_city")
    assert "added" in browser.find_element(By.ID, "diff").text
    _shot(browser, "event")


def test_browser_approve_and_the_run_continues(
    server: Server, browser: WebDriver, paused_demo: tuple[Path, str]
) -> None:
    db, sid = paused_demo
    browser.get(server.sign_in_url)  # the URL evs web printed: it signs this browser in
    WebDriverWait(browser, WAIT).until(lambda d: "token=" not in d.current_url)
    browser.get(f"{server.url}/pending/{sid}")
    assert server.token not in browser.page_source
    _shot(browser, "pending")
    browser.find_element(By.CSS_SELECTOR, "button.approve").click()
    _wait_text(browser, "#done", "approved")
    resumed = evs("demo", "--db", str(db), "--resume", sid)
    assert resumed.returncode == 0, resumed.stderr
    assert f"Done: session {sid} is complete" in resumed.stdout
    browser.get(f"{server.url}/pending/{sid}")
    _wait_text(browser, "#nothing", "Nothing is pending")


def test_browser_without_the_printed_url_cannot_answer(
    server: Server, browser: WebDriver, paused_demo: tuple[Path, str]
) -> None:
    _, sid = paused_demo
    browser.get(f"{server.url}/pending/{sid}")
    assert not browser.find_elements(By.CSS_SELECTOR, "button.approve")
    assert "open the URL evs web printed" in browser.page_source
    browser.get(server.sign_in_url)
    browser.get(f"{server.url}/pending/{sid}")
    browser.execute_script(
        "document.querySelectorAll('input[name=csrf]').forEach(e => e.value = 'forged')")
    browser.find_element(By.CSS_SELECTOR, "button.approve").click()
    _wait_text(browser, "#error", "CSRF value is missing or wrong")
    browser.get(f"{server.url}/pending/{sid}")
    assert browser.find_elements(By.CSS_SELECTOR, "button.approve")


def test_browser_fork_from_a_seq(
    server: Server, browser: WebDriver, paused_demo: tuple[Path, str]
) -> None:
    _, sid = paused_demo
    browser.get(server.sign_in_url)
    browser.get(f"{server.url}/e/4/{sid}")
    browser.find_element(By.NAME, "new_id").send_keys("forked-in-browser")
    browser.find_element(By.ID, "fork").click()
    _wait_text(browser, "p.link", "Forked from")
    assert browser.current_url.endswith("/s/forked-in-browser?app=weather-demo&user=demo-user")
    rows = [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "li.row")]
    assert rows == ["seq-1", "seq-2", "seq-3", "seq-4"]


def test_browser_live_event_arrives(
    server: Server, browser: WebDriver, paused_demo: tuple[Path, str]
) -> None:
    db, sid = paused_demo
    browser.get(f"{server.url}/s/{sid}")
    _wait_text(browser, "#live-status", "connected")
    confirmation = evs("pending", sid, "--db", str(db), "--json").stdout
    [cid] = [w.strip('",') for w in confirmation.split() if w.startswith('"confirm-')][:1]
    assert evs("confirm", sid, cid, "--yes", "--db", str(db)).returncode == 0
    _wait_text(browser, "#seq-9", "confirmation")
    assert browser.find_element(By.ID, "seq-9").is_displayed()
