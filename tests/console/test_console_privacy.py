"""The console shows erasures (ADR-0083), in a real browser, on each store: the privacy page lists
the receipts, the retention runs and the export keys destroyed; an owner's rows as of a moment
before an erasure show the erased row's placeholder; and no page holds a word of what was erased."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

from selenium import webdriver
from selenium.webdriver.common.by import By

from fermix_memory import MemorySystem
from fermix_memory.application.streams import EXPORT_KEYS_STREAM
from fermix_memory.domain import events as ev
from fermix_memory.entrypoints.bootstrap import bootstrap
from tests.console.test_console_browser import _sign_in, _wait
from tests.manual_clock import START, TestClock
from tests.server.test_serve_process import serving

SECRETS = ("Wilhelmina Thistlewood", "Quetzalcoatlus", "Marzipanmountain")
POLICY = {"fermix_core": {"retention": {"check_every_s": 0, "policy": [
    {"name": "kiosk", "after": "15m", "category": "interest"}]}}}


def _seed(home: Path) -> str:
    """Alice's two secret rows (the pet's category falls under the ``kiosk`` policy), carol's row, a
    message; then the visitor row forgotten by olga, the kiosk policy run, carol forgotten and her
    export keys destroyed. Returns a moment at which both of alice's rows stood."""
    clock = TestClock(START)
    app = bootstrap(home, clock=clock, config=POLICY)
    with MemorySystem(app) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:42", role="user",
                              sender="alice", content="Hello there")
        visitor = memory.write_memory({"op": "add", "category": "identity", "key": "visitor",
                                       "value": f"{SECRETS[0]} visits"}, agent_id="ada", owner_id="alice",
                                      trust="operator")[0].memory_id
        memory.write_memory({"op": "add", "category": "interest", "key": "pet", "value": f"a {SECRETS[1]}"},
                            agent_id="ada", owner_id="alice", trust="operator")
        memory.write_memory({"op": "add", "category": "preference", "key": "snack", "value": SECRETS[2]},
                            agent_id="ada", owner_id="carol", trust="operator")
        clock.t = START + timedelta(minutes=10)
        memory.forget_memory(visitor, by="olga", reason="asked by alice")
        clock.t = START + timedelta(minutes=20)
        assert len(memory.run_retention().items) == 1
        memory.forget_owner("carol", agent_id="ada", by="olga")
        [carol] = [e.position for e in memory.log_entries(kind="owner.forgotten")]
        keys = ev.ExportKeysDestroyed(at=clock.t, pairs=(("ada", "carol"),), records=(carol,))
        app.store.write(lambda tx: tx.append(EXPORT_KEYS_STREAM, [keys]))  # as the keyring records it
    return START.isoformat()


def test_the_privacy_page_and_the_as_of_rows_show_erasures_without_their_content(
        browser: webdriver.Chrome, tmp_path: Path, every_store: str) -> None:
    home = tmp_path / "home"
    moment = _seed(home)
    with serving(home) as (_, url):
        browser.delete_all_cookies()
        _sign_in(browser, url)
        browser.find_element(By.LINK_TEXT, "Privacy").click()
        _wait(browser, lambda b: b.find_elements(By.ID, "receipt-table"), "the privacy page")
        receipts = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "tr.receipt")]
        assert any("retention policies kiosk" in r and "in 2 records" in r for r in receipts), receipts
        assert any("operator olga" in r and "asked by alice" in r for r in receipts), receipts
        [run] = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "tr.run")]
        assert "kiosk" in run and " 1 " in f" {run} "
        assert any("ada/carol" in k.text for k in browser.find_elements(By.CSS_SELECTOR, "tr.keys"))

        browser.get(f"{url}/owners/ada/alice?as_of={quote(moment, safe='')}")
        _wait(browser, lambda b: b.find_elements(By.ID, "erased"), "the erased rows as of the moment")
        erased = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "li.erased-row")]
        assert len(erased) == 2 and any("by operator olga" in e for e in erased)
        assert any("by retention policy kiosk" in e for e in erased)

        browser.find_element(By.LINK_TEXT, "Event log").click()
        _wait(browser, lambda b: b.find_elements(By.ID, "head"), "the event log")
        assert "retention run of kiosk" in browser.page_source and "export keys destroyed: ada/carol" \
            in browser.page_source
        for page in ("/owners", "/owners/ada/alice", f"/owners/ada/alice?as_of={quote(moment, safe='')}",
                     "/owners/ada/carol", "/owners/ada/alice/history", "/events", "/privacy"):
            browser.get(url + page)
            _wait(browser, lambda b: b.find_elements(By.TAG_NAME, "main"), page)
            assert not any(secret in browser.page_source for secret in SECRETS), page
        browser.get("about:blank")
