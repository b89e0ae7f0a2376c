"""A real browser on the console: Debian's Chromium and chromium-driver, headless, driven by
Selenium; nothing is downloaded (Selenium Manager stays offline and is never needed: the driver
and the browser are named)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

pytest.importorskip("selenium")

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    if CHROMIUM is None or DRIVER is None:
        pytest.fail("the console's tests need Debian's chromium and chromium-driver (.ci/run installs them)")
    os.environ["SE_OFFLINE"] = "true"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,900", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-default-apps"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    try:
        yield driver
    finally:
        driver.quit()
