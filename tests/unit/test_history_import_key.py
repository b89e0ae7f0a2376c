"""The import key of a line without ``message_id`` is the one ADR-0012 defines: a file imported
again, by any version, must give each line the key it gave before."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from fermix_memory.application.history import IMPORT_KEY, parse_history

LINE = {"agent_id": "a1", "owner_id": "o1", "channel": "slack", "chat_id": "c\u00e9", "role": "user",
        "sender": "o1", "content": "caf\u00e9 \u2713 \"quoted\" \u2028 \U0001f600", "trust": "operator",
        "metadata": {"z": 1, "b": [1.5, None, True]}}


def test_a_line_without_message_id_is_keyed_by_the_digest_of_its_canonical_json_and_its_repeat() -> None:
    canonical = json.dumps(LINE, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    expected = ["sha256:" + hashlib.sha256((canonical + "\n" + str(n)).encode()).hexdigest()[:32] for n in (1, 2)]
    events = parse_history([json.dumps(LINE), json.dumps(LINE, ensure_ascii=False)], datetime.now(UTC))
    assert [e.metadata[IMPORT_KEY] for e in events] == expected
