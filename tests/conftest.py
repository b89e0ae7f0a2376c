"""Suite-wide settings: hypothesis never fails a test on wall-clock time (the suite shares a
small, busy machine; timings are not what any property here is about)."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("fermix", deadline=None)
settings.load_profile("fermix")
