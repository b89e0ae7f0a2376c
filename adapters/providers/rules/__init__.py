"""The offline ``rules`` model: a chat model that needs no model at all.

:mod:`.provider` answers memory-review and compaction requests; :mod:`.extractor` (with
:mod:`.text` and :mod:`.patterns`) finds the explicit first-person statements it answers with.
The route imports this package only when a ``rules`` provider is configured.
"""

from __future__ import annotations

from fermix_memory.adapters.providers.rules.provider import RulesProvider

__all__ = ["RulesProvider"]
