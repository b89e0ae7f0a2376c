"""The operator console in a real browser (ADR-0074): every page walked, every form submitted,
reachable by keyboard, no request leaving 127.0.0.1, and an owner's page following a host's
writes live, on each store."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from fermix_memory import MemorySystem
from tests.server.test_serve_process import TOKEN, serving
from tests.waits import HANG_GUARD_S

OPERATOR_TOKEN = TOKEN["FERMIX_TEST_OPERATOR"]
SHOTS = Path(__file__).parents[2] / "docs" / "console"


READER_TOKEN = "reader-secret-1"
LIVE_BAR_S = 2.0  # an owner's page shows another process's write within this (issue 36)


def _seed(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(READER_TOKEN.encode()).hexdigest()
    (home / "config.toml").write_text(
        f'[[fermix_core.server_tokens]]\nname = "auditor"\nsha256 = "{digest}"\nrole = "reader"\n', encoding="utf-8")
    with MemorySystem.open(home) as memory:
        s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        s.append("user", "I live in Lisbon and I play the cello", sender="alice")
        s.append("assistant", "Lovely! Lisbon has great music.")
        memory.review_now(agent_id="ada", owner_id="alice")
        memory.write_memory({"op": "add", "category": "preference", "key": "coffee", "value": "Prefers flat whites"},
                            agent_id="ada", owner_id="alice", trust="operator")
        memory.write_memory({"op": "add", "category": "preference", "key": "tea", "value": "Green tea after lunch"},
                            agent_id="ada", owner_id="alice", trust="operator")
        memory.write_memory({"op": "add", "category": "identity", "key": "home_city", "value": "Oslo"},
                            agent_id="ada", owner_id="bob", trust="operator")


@pytest.fixture
def console(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "home"
    _seed(home)
    with serving(home) as (_, url):
        yield url, home


def _wait(browser: webdriver.Chrome, condition: object, what: str) -> None:
    """Until ``condition`` holds; a live page may redraw its rows meanwhile (stale elements are retried)."""
    WebDriverWait(browser, HANG_GUARD_S, poll_frequency=0.05,
                  ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
                  ).until(condition, what)  # type: ignore[arg-type]


def _wait_until(browser: webdriver.Chrome, deadline: float, condition: object, what: str) -> None:
    """Until ``condition`` holds, failing once ``deadline`` (``time.monotonic()``) passes: a bar the
    issue sets in seconds, measured from an event the test makes, not counting any page load."""
    WebDriverWait(browser, max(0.0, deadline - time.monotonic()), poll_frequency=0.02,
                  ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
                  ).until(condition, what)  # type: ignore[arg-type]


def _click(browser: webdriver.Chrome, css: str) -> None:
    """Click what ``css`` names, found again if the live page redrew it in between."""
    def clicked(b: webdriver.Chrome) -> bool:
        b.find_element(By.CSS_SELECTOR, css).click()
        return True

    _wait(browser, clicked, f"a click on {css}")


def _sign_in(browser: webdriver.Chrome, url: str, token: str = OPERATOR_TOKEN) -> None:
    browser.get(f"{url}/owners")
    _wait(browser, lambda b: b.current_url.endswith("/signin"), "the sign-in page")
    field = browser.find_element(By.ID, "token")
    field.send_keys(token, Keys.ENTER)  # the keyboard signs in: no mouse needed
    _wait(browser, lambda b: b.current_url.endswith("/owners"), "the owners page")


def _shot(browser: webdriver.Chrome, name: str) -> None:
    """Screenshots for docs/console/, when asked for (FERMIX_CONSOLE_SCREENSHOTS=1)."""
    if os.environ.get("FERMIX_CONSOLE_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(SHOTS / f"{name}.png"))


def _requests(browser: webdriver.Chrome) -> list[str]:
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _focus_and_enter(browser: webdriver.Chrome, by: str, value: str) -> None:
    """Tab from the top of the page until what (``by``, ``value``) names has the focus, then press Enter."""
    body = browser.find_element(By.TAG_NAME, "body")
    body.click()
    for _ in range(200):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        try:
            reached = browser.switch_to.active_element == browser.find_element(by, value)
        except StaleElementReferenceException:
            continue  # the live page redrew its rows: look again
        if reached:
            browser.switch_to.active_element.send_keys(Keys.ENTER)
            return
    pytest.fail(f"Tab never reached {value}")


def test_every_page_and_form_works_from_the_keyboard_and_stays_on_this_machine(
        browser: webdriver.Chrome, console: tuple[str, Path]) -> None:
    url, home = console
    browser.get_log("performance")  # what earlier tests loaded is not this test's
    _sign_in(browser, url)
    _shot(browser, "owners")
    _focus_and_enter(browser, By.LINK_TEXT, "alice")
    _wait(browser, lambda b: "/owners/ada/alice" in b.current_url, "alice's page")
    assert "Prefers flat whites" in browser.page_source and "Oslo" not in browser.page_source
    _shot(browser, "owner")

    _focus_and_enter(browser, By.CSS_SELECTOR, 'li[data-key="coffee"] button')
    _wait(browser, lambda b: "archived" in b.find_element(By.CSS_SELECTOR, 'li[data-key="coffee"]')
          .get_attribute("class"), "the coffee row greyed out")
    _click(browser, 'li[data-key="coffee"] button')  # Restore
    _wait(browser, lambda b: "archived" not in b.find_element(By.CSS_SELECTOR, 'li[data-key="coffee"]')
          .get_attribute("class"), "the coffee row restored")

    browser.find_element(By.ID, "q").send_keys("tea", Keys.ENTER)
    _wait(browser, lambda b: "Green tea" in b.page_source and "flat whites" not in b.page_source, "the search")

    _click(browser, 'li[data-key="tea"] a')
    _wait(browser, lambda b: "Its story" in b.page_source, "the fact's story")
    assert "memory.added" in browser.page_source and "operator trust" in browser.page_source
    browser.back()
    browser.find_element(By.LINK_TEXT, "USER.md revisions").click()
    _wait(browser, lambda b: "USER.md of" in b.page_source, "the revisions")
    assert browser.find_elements(By.CSS_SELECTOR, "pre.diff .add")
    _shot(browser, "revisions")
    before = len(browser.find_elements(By.CSS_SELECTOR, "tbody tr"))
    browser.find_elements(By.CSS_SELECTOR, "tbody tr button")[-1].click()  # roll back to the oldest
    _wait(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "tbody tr")) == before + 1, "a new revision")

    browser.find_element(By.LINK_TEXT, "Event log").click()
    browser.find_element(By.XPATH, "//button[text()='Verify the log']").click()
    _wait(browser, lambda b: b.find_elements(By.ID, "verify-result"), "the verify result")
    assert browser.find_element(By.ID, "verify-result").text.startswith("Verified")
    _shot(browser, "events")

    browser.get(f"{url}/owners/ada/alice/forget")
    assert "would erase owner" in browser.find_element(By.ID, "preview").text
    browser.find_element(By.ID, "confirm").send_keys("alic", Keys.ENTER)
    _wait(browser, lambda b: "did not match" in b.page_source, "the refused confirmation")
    with MemorySystem.open(home, readonly=True) as memory:
        assert memory.memories(agent_id="ada", owner_id="alice")
    browser.find_element(By.ID, "confirm").send_keys("alice", Keys.ENTER)
    _wait(browser, lambda b: b.find_elements(By.ID, "forget-result"), "the forget result")
    assert "none of the" in browser.find_element(By.ID, "scan").text
    _shot(browser, "forget")

    outside = [u for u in _requests(browser) if not u.startswith((url, "data:", "about:"))]
    assert outside == []
    browser.get("about:blank")


def test_a_reader_sees_but_changes_nothing_and_a_forged_form_is_refused(
        browser: webdriver.Chrome, console: tuple[str, Path]) -> None:
    url, home = console
    browser.delete_all_cookies()
    browser.get(f"{url}/owners/ada/alice")
    _wait(browser, lambda b: b.current_url.endswith("/signin"), "signed out: the sign-in page")
    browser.find_element(By.ID, "token").send_keys("not-a-token", Keys.ENTER)
    _wait(browser, lambda b: "not one of this server" in b.page_source, "the refused token")
    _sign_in(browser, url, READER_TOKEN)
    browser.get(f"{url}/owners/ada/alice")
    _wait(browser, lambda b: "Prefers flat whites" in b.page_source, "alice's page for the reader")
    assert not browser.find_elements(By.CSS_SELECTOR, "li.row button")
    assert "Forget this owner" not in browser.page_source
    row = browser.find_element(By.CSS_SELECTOR, 'li[data-key="coffee"] a').get_attribute("href").rsplit("/", 1)[1]
    csrf = browser.find_element(By.NAME, "csrf").get_attribute("value")
    submit = """const f = document.createElement('form'); f.method = 'post'; f.action = arguments[0];
                const i = document.createElement('input'); i.name = 'csrf'; i.value = arguments[1];
                f.appendChild(i); document.body.appendChild(f); f.submit();"""
    for token, answer in ((csrf + "x", "not from this console session"), (csrf, "a reader may not change anything")):
        browser.execute_script(submit, f"{url}/memories/{row}/archive", token)
        _wait(browser, lambda b, a=answer: a in b.page_source, f"the refusal: {answer}")
    with MemorySystem.open(home, readonly=True) as memory:
        assert all(r.archived_at is None for r in memory.memories(agent_id="ada", owner_id="alice"))
    browser.get(f"{url}/events")
    browser.find_element(By.XPATH, "//button[text()='Verify the log']").click()  # reading the log is a read
    _wait(browser, lambda b: b.find_elements(By.ID, "verify-result"), "the reader's verify result")
    browser.get("about:blank")


def test_an_owners_page_follows_another_hosts_writes_live(browser: webdriver.Chrome, tmp_path: Path,
                                                          every_store: str) -> None:
    home = tmp_path / "home"
    _seed(home)
    with serving(home) as (_, url):
        browser.delete_all_cookies()
        _sign_in(browser, url)
        browser.get(f"{url}/owners/ada/bob")
        _wait(browser, lambda b: "Oslo" in b.page_source, "bob's page")
        _wait(browser, lambda b: b.find_element(By.ID, "rows").get_attribute("data-listening") == "yes",
              "the page listening to its stream")
        with MemorySystem.open(home) as host:  # another process's memory on the same store, opened first
            for n, value in enumerate(("Skis every winter", "Swims in the fjord")):
                writing = time.monotonic()  # the bar (issue 36): on the page within 2 s of the write
                host.write_memory({"op": "add", "category": "preference", "key": f"sport{n}", "value": value},
                                  agent_id="ada", owner_id="bob", trust="operator")
                _wait_until(browser, writing + LIVE_BAR_S, lambda b, v=value: v in b.find_element(By.ID, "rows").text,
                            f"the new row {value!r} on the open page within {LIVE_BAR_S} s of the write")
        browser.get("about:blank")  # the page's stream ends with it


def test_a_conversation_found_in_the_history_and_a_fact_are_forgotten_behind_the_owners_id(
        browser: webdriver.Chrome, console: tuple[str, Path]) -> None:
    url, home = console
    with MemorySystem.open(home) as memory:  # a question and its answer: the answer is the hit's context
        s = memory.session(agent_id="ada", owner_id="alice", conversation="telegram:42")
        s.append("user", "Do you remember which instrument I play?", sender="alice")
        s.append("assistant", "The cello, since you were eight.")
    browser.delete_all_cookies()
    _sign_in(browser, url)
    browser.get(f"{url}/owners/ada/alice")
    browser.find_element(By.LINK_TEXT, "Conversation history").click()
    _wait(browser, lambda b: b.find_elements(By.ID, "hq"), "the history page")
    browser.find_element(By.ID, "hq").send_keys("instrument", Keys.ENTER)
    _wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "li.hit"), "the search's hits")
    hit = browser.find_element(By.CSS_SELECTOR, "li.hit").text
    assert "telegram:42" in hit and "alice" in hit and "The cello, since you were eight." in hit  # and its reply
    _shot(browser, "history")
    browser.find_element(By.CSS_SELECTOR, "li.hit a").click()
    _wait(browser, lambda b: "/conversations/telegram%3A42" in b.current_url, "the conversation's page")
    assert "I live in Lisbon and I play the cello" in browser.find_element(By.CSS_SELECTOR, "ol.window").text
    browser.find_element(By.PARTIAL_LINK_TEXT, "Forget this conversation").click()
    _wait(browser, lambda b: b.find_elements(By.ID, "preview"), "the conversation's preview")
    assert "would erase conversation 'telegram:42'" in browser.find_element(By.ID, "preview").text
    browser.find_element(By.ID, "confirm").send_keys("bob", Keys.ENTER)
    _wait(browser, lambda b: "did not match" in b.page_source, "the refused confirmation")
    browser.find_element(By.ID, "confirm").send_keys("alice", Keys.ENTER)
    _wait(browser, lambda b: b.find_elements(By.ID, "forget-result"), "the conversation forgotten")
    assert "none of the" in browser.find_element(By.ID, "scan").text
    with MemorySystem.open(home, readonly=True) as memory:
        assert memory.messages("ada", "telegram:42") == []

    browser.get(f"{url}/owners/ada/alice")
    _click(browser, 'li[data-key="tea"] a')
    _wait(browser, lambda b: "Its story" in b.page_source, "the fact's story")
    browser.find_element(By.PARTIAL_LINK_TEXT, "Forget this fact").click()
    _wait(browser, lambda b: b.find_elements(By.ID, "preview"), "the fact's preview")
    assert "would erase memory" in browser.find_element(By.ID, "preview").text
    browser.find_element(By.ID, "confirm").send_keys("alice", Keys.ENTER)
    _wait(browser, lambda b: b.find_elements(By.ID, "forget-result"), "the fact forgotten")
    assert "none of the" in browser.find_element(By.ID, "scan").text
    with MemorySystem.open(home, readonly=True) as memory:
        keys = {r.key for r in memory.memories(agent_id="ada", owner_id="alice")}
    assert "tea" not in keys and "coffee" in keys
    browser.get("about:blank")


# Every link, button and field a page has is reached by Tab, in order, from the page's top.
REACHABLE = "a[href], button, input:not([type=hidden]), select"


def test_every_action_of_every_page_is_reached_by_the_tab_key(browser: webdriver.Chrome,
                                                              console: tuple[str, Path]) -> None:
    url, home = console
    browser.delete_all_cookies()
    _sign_in(browser, url)
    with MemorySystem.open(home, readonly=True) as memory:
        row = memory.memories(agent_id="ada", owner_id="alice")[0].id
    owner = f"{url}/owners/ada/alice"
    for page in (f"{url}/owners", owner, f"{url}/memories/{row}", f"{owner}/files/user_md", f"{url}/events",
                 f"{owner}/history?q=Lisbon", f"{owner}/forget", f"{url}/privacy"):
        browser.get(page)
        count = browser.execute_script(
            "const all = document.querySelectorAll(arguments[0]);"
            "all.forEach((e, i) => e.setAttribute('data-reach', String(i))); return all.length;", REACHABLE)
        assert count > 0, page
        reached: set[str] = set()
        browser.execute_script("document.activeElement && document.activeElement.blur()")
        for _ in range(count * 3):
            ActionChains(browser).send_keys(Keys.TAB).perform()
            mark = browser.switch_to.active_element.get_attribute("data-reach")
            if mark is not None:
                reached.add(mark)
            if len(reached) == count:
                break
        assert reached == {str(i) for i in range(count)}, page
    browser.get("about:blank")
