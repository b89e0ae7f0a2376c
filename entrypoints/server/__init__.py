"""The memory server (``fermix serve``, extra ``[server]``): the HTTP API under ``/v1`` (ADR-0073)."""

from fermix_memory.entrypoints.extras import require

require("server", "starlette")
