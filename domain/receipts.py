"""The receipt of an erasure (ADR-0079): what it says, its canonical text (what is signed), and
the check of a receipt against a log read in order. Pure: the signature itself is checked by
whoever holds the public key.

A receipt names what one erasure took out of the log by positions and digests, never by
content: the erasure's records (``[position, kind, digest]``), the events they redacted
(``[position, digest]``), the log's head before and after it, when it happened, who asked for
it and which export keys were destroyed with it. Its body is canonical JSON (sorted keys, no
spaces, ASCII, ints and text only); the receipt file is the body with a ``signature`` key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.log_chain import (
    GENESIS_HASH,
    ChainCheck,
    Head,
    LoggedEvent,
    checkpoint_hash,
    is_hex_digest,
)

RECEIPT_FORMAT = 1
RECEIPT_KIND = "erasure.receipted"  # the event that records a receipt in the log
BODY_KEYS = frozenset({"receipt", "public_key", "at", "asked_by", "records", "erased", "head_before", "head_after",
                       "keys_destroyed"})
ASKED_BY_KEYS = frozenset({"source_type", "source_id", "reason"})


class BadReceipt(DomainError):
    """A receipt that is not what the format says."""


def canonical(value: object) -> str:
    """The canonical JSON text of ``value``: what a receipt's signature covers."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@attrs.frozen(kw_only=True)
class Receipt:
    """A receipt's body and, once signed, its signature (hex)."""

    public_key: str
    at: str
    source_type: str
    source_id: str
    reason: str
    records: tuple[tuple[int, str, str], ...]
    erased: tuple[tuple[int, str], ...]
    head_before: str
    head_after: str
    keys_destroyed: tuple[tuple[str, str], ...] = ()
    signature: str = ""

    def body(self) -> dict[str, Any]:
        return {"receipt": RECEIPT_FORMAT, "public_key": self.public_key, "at": self.at,
                "asked_by": {"source_type": self.source_type, "source_id": self.source_id, "reason": self.reason},
                "records": [list(r) for r in self.records], "erased": [list(e) for e in self.erased],
                "head_before": self.head_before, "head_after": self.head_after,
                "keys_destroyed": [list(k) for k in self.keys_destroyed]}

    def body_text(self) -> str:
        """The canonical body: exactly what is signed and what the log's event keeps."""
        return canonical(self.body())

    def document(self) -> dict[str, Any]:
        """The receipt file's object: the body and its ``signature``."""
        return {**self.body(), "signature": self.signature}


def _text(value: object, what: str) -> str:
    if type(value) is not str:
        raise BadReceipt(f"{what} must be text")
    return value


def _whole(value: object, what: str) -> int:
    if type(value) is not int or value < 1:
        raise BadReceipt(f"{what} must be a position (a whole number from 1)")
    return value


def _digest(value: object, what: str) -> str:
    text = _text(value, what)
    if not is_hex_digest(text):
        raise BadReceipt(f"{what} must be 64 lower-case hex digits")
    return text


def _items(value: object, what: str, size: int) -> list[list[Any]]:
    if type(value) is not list or any(type(item) is not list or len(item) != size for item in value):
        raise BadReceipt(f"{what} must be a list of [{size} values]")
    return value


def parse_receipt(document: object) -> Receipt:
    """The receipt of a receipt file's object (the body with its ``signature``); :class:`BadReceipt`
    names the first thing wrong with it."""
    if not isinstance(document, Mapping):
        raise BadReceipt("a receipt is a JSON object")
    if set(document) != BODY_KEYS | {"signature"}:
        raise BadReceipt("a receipt holds " + ", ".join(sorted(BODY_KEYS | {"signature"})) + " and nothing else")
    if document["receipt"] != RECEIPT_FORMAT or type(document["receipt"]) is not int:
        raise BadReceipt(f"receipt format {document['receipt']!r:.20} is not {RECEIPT_FORMAT}, the one this reads")
    asked = document["asked_by"]
    if not isinstance(asked, Mapping) or set(asked) != ASKED_BY_KEYS:
        raise BadReceipt("asked_by holds source_type, source_id and reason")
    records = tuple((_whole(p, "a record's position"), _text(k, "a record's kind"), _digest(d, "a record's digest"))
                    for p, k, d in _items(document["records"], "records", 3))
    erased = tuple((_whole(p, "an erased position"), _digest(d, "an erased event's digest"))
                   for p, d in _items(document["erased"], "erased", 2))
    keys = tuple((_text(a, "an agent id"), _text(o, "an owner id"))
                 for a, o in _items(document["keys_destroyed"], "keys_destroyed", 2))
    for name in ("head_before", "head_after"):
        parse_head(_text(document[name], name))
    return Receipt(public_key=_text(document["public_key"], "public_key"), at=_text(document["at"], "at"),
                   source_type=_text(asked["source_type"], "source_type"),
                   source_id=_text(asked["source_id"], "source_id"), reason=_text(asked["reason"], "reason"),
                   records=records, erased=erased, head_before=_text(document["head_before"], "head_before"),
                   head_after=_text(document["head_after"], "head_after"), keys_destroyed=keys,
                   signature=_text(document["signature"], "signature"))


def parse_head(text: str) -> Head:
    """The head an anchor's text names: ``POSITION:HASH``, or ``P0,P1,...:CHECKPOINT``."""
    where, sep, hash_ = text.partition(":")
    try:
        positions = tuple(int(p) for p in where.split(","))
    except ValueError:
        raise BadReceipt(f"{text[:40]!r} is not a head (POSITION:HASH)") from None
    if not sep or not is_hex_digest(hash_) or min(positions) < 0:
        raise BadReceipt(f"{text[:40]!r} is not a head (POSITION:HASH)")
    if len(positions) == 1:
        return Head(positions[0], hash_)
    return Head(max(positions), hash_, positions)


def _redacted_positions(payload: str) -> set[int]:
    """The positions an erasure record's payload says it redacted (none when it does not say)."""
    try:
        found = json.loads(payload).get("redacted_positions")
    except (ValueError, AttributeError):
        return set()
    return {p for p in found if type(p) is int} if isinstance(found, list) else set()


class ReceiptCheck:
    """Feed it a log's events in order (every one, redacted ones included), then ask
    :meth:`problems`: every way the log does not bear the receipt out. ``chains`` and
    ``chain_of`` are the log's (see :class:`ChainCheck`)."""

    def __init__(self, receipt: Receipt, *, chains: int = 1, chain_of: Callable[[str], int] | None = None) -> None:
        self.receipt = receipt
        self._chain = ChainCheck(chains=chains, chain_of=chain_of)
        self._broken = ""
        self._erased = dict(receipt.erased)
        self._records = {p: (k, d) for p, k, d in receipt.records}
        self._heads = {h: parse_head(h) for h in (receipt.head_before, receipt.head_after)}
        self._wanted = {p for head in self._heads.values() for p in (head.chains or (head.position,))}
        self._seen: dict[int, str] = {0: GENESIS_HASH}
        self._found: dict[int, LoggedEvent] = {}
        self._recorded = False
        self._body = receipt.body_text()

    def add(self, e: LoggedEvent) -> None:
        if not self._broken:
            self._broken = self._chain.problem(e)
        if e.position in self._wanted:
            self._seen[e.position] = e.hash
        if e.position in self._erased or e.position in self._records:
            self._found[e.position] = e
        if e.kind == RECEIPT_KIND and e.payload is not None and not self._recorded:
            self._recorded = _records_receipt(e.payload, self._body, self.receipt.signature)

    def problems(self, declared: Head | None = None) -> list[str]:
        """What is wrong, one sentence each (none: the log bears the receipt out). ``declared``:
        the head the log's source says it ends at (an event file's header)."""
        found = [f"the log's chain is broken: {self._broken}"] if self._broken else []
        if not self._broken and declared is not None and self._chain.head != declared:
            found.append(f"the log ends at {self._chain.head}, not at the head {declared} it declares")
        found += self._erased_problems() + self._record_problems() + self._head_problems()
        if not self._recorded:
            found.append(f"the log holds no {RECEIPT_KIND} event of this receipt")
        return found

    def _erased_problems(self) -> list[str]:
        found = []
        for position, digest in self.receipt.erased:
            e = self._found.get(position)
            if e is None:
                found.append(f"erased event {position} is not in the log")
                continue
            if e.payload is not None:
                found.append(f"erased event {position} ({e.kind}) is readable: its payload is in the log")
            if e.payload_sha256 != digest:
                found.append(f"erased event {position} has the digest {e.payload_sha256}, not {digest}")
        return found

    def _record_problems(self) -> list[str]:
        found: list[str] = []
        redacted: set[int] = set()
        for position, kind, digest in self.receipt.records:
            e = self._found.get(position)
            if e is None:
                found.append(f"record {position} is not in the log")
                continue
            if e.kind != kind:
                found.append(f"record {position} is a {e.kind} event, not {kind}")
            if e.payload_sha256 != digest:
                found.append(f"record {position} has the digest {e.payload_sha256}, not {digest}")
            if e.payload is None:
                found.append(f"record {position} is redacted: what it erased cannot be read")
            else:
                redacted |= _redacted_positions(e.payload)
        if not found and redacted != set(self._erased):
            found.append("the records redacted positions " + _positions(redacted) + "; the receipt names "
                         + _positions(set(self._erased)))
        return found

    def _head_problems(self) -> list[str]:
        found = [f"{name} {text[:40]}… is not a head of this log" for name, text in
                 (("head_before", self.receipt.head_before), ("head_after", self.receipt.head_after))
                 if not self._holds(self._heads[text])]
        positions = [p for p, _, _ in self.receipt.records]
        if positions and self._heads[self.receipt.head_before].position >= min(positions):
            found.append("head_before is not before the erasure's records")
        if positions and self._heads[self.receipt.head_after].position < max(positions):
            found.append("head_after is before the erasure's records")
        return found

    def _holds(self, head: Head) -> bool:
        if not head.chains:
            return self._seen.get(head.position) == head.hash
        if any(p not in self._seen for p in head.chains):
            return False
        return checkpoint_hash([(p, self._seen[p]) for p in head.chains]) == head.hash


def _records_receipt(payload: str, body: str, signature: str) -> bool:
    """Whether an ``erasure.receipted`` payload keeps this receipt's body and signature."""
    try:
        item = json.loads(payload)
    except ValueError:
        return False
    return isinstance(item, dict) and item.get("receipt") == body and item.get("signature") == signature


def _positions(positions: set[int]) -> str:
    shown = sorted(positions)
    text = ",".join(map(str, shown[:20])) + (",…" if len(shown) > 20 else "")
    return f"[{text}]"


def check_problems(receipt: Receipt, events: Sequence[LoggedEvent], *, declared: Head | None = None,
                   chains: int = 1, chain_of: Callable[[str], int] | None = None) -> list[str]:
    """:class:`ReceiptCheck` over ``events`` at once."""
    check = ReceiptCheck(receipt, chains=chains, chain_of=chain_of)
    for e in events:
        check.add(e)
    return check.problems(declared)
