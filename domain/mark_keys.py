"""The keys of the ``message_marks`` projection: a day a turn speaks of (``d:2024-02-26``) and a
name it mentions (``e:mei``); what recall reads them by, apart from what finds them."""

from __future__ import annotations

from datetime import date

DAY = "d:"  # a day the turn speaks of: "d:2024-02-26"
NAME = "e:"  # a name the turn mentions, case-folded: "e:mei"


def day_mark(day: date) -> str:
    """The mark of a day (a ``date``): ``d:`` and its ISO form."""
    return DAY + str(day)


def name_mark(name: str) -> str:
    """The mark of a name: ``e:`` and the name, case-folded as ``entities_in`` gives it."""
    return NAME + name.casefold()
