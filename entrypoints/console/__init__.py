"""The operator console of ``fermix serve`` (ADR-0074): server-rendered pages at ``/``."""

from fermix_memory.entrypoints.extras import require

require("server", "jinja2")
require("server", "itsdangerous")
