"""The storage settings (ADR-0029): ``[fermix_core.storage] url``, the PostgreSQL database a
memory lives in when it is not the SQLite file of its home.

The URL never holds a password: ``config.toml`` is a file people copy, paste and commit. The
password comes from libpq's own sources, the ``PGPASSWORD`` variable or the password file
(``~/.pgpass``, or the file ``PGPASSFILE`` names).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import attrs

from fermix_memory.application.settings_checks import POSITIVE_INT, STR, Rule, about, at_most
from fermix_memory.domain.log_chain import MAX_CHAINS

DATABASE_URL_ENV = "FERMIX_DATABASE_URL"
URL_SHAPE = "postgresql://USER@HOST:PORT/DATABASE"
DEFAULT_CHAINS = 16


def storage_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a storage URL, in words that never repeat it (it may hold a
    password); ``None`` when it names a PostgreSQL database without a password."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  # a port that is not a number raises here
    except ValueError:
        return f"not a valid URL; give {URL_SHAPE}"
    if parts.scheme not in ("postgresql", "postgres"):
        return f"not a PostgreSQL URL; give {URL_SHAPE}"
    if parts.password is not None or "password" in parse_qs(parts.query):
        return ("a URL holding a password; remove it and give the password through PGPASSWORD or the"
                " password file (~/.pgpass, or the file PGPASSFILE names)")
    if not re.fullmatch(r"/[^/]+", parts.path or ""):
        return f"a URL that names no database; give {URL_SHAPE}"
    return None


@attrs.frozen(kw_only=True)
class StorageSettings:
    """``[fermix_core.storage]``: where the memory lives (``FERMIX_DATABASE_URL`` wins over it)."""

    url: str | None = attrs.field(default=None, metadata=about(
        Rule(STR, lambda v: storage_url_problem(v) is None,
             f"a {URL_SHAPE} URL without a password (the password comes from PGPASSWORD or ~/.pgpass)"),
        "The PostgreSQL database this memory lives in, shared by every process and host that names it"
        " (the [postgres] extra). Not set: the SQLite file memory.db in the home. The environment"
        f" variable {DATABASE_URL_ENV} wins over it. Never put a password here: it comes from"
        " PGPASSWORD or the password file (~/.pgpass, or PGPASSFILE).",
        "postgresql://fermix@db.example:5432/fermix"))
    chains: int = attrs.field(default=DEFAULT_CHAINS, metadata=about(
        at_most(POSITIVE_INT, MAX_CHAINS, "chains"),
        "How many hash chains a new PostgreSQL event log has (ADR-0031): writes of different owners"
        " and conversations extend different chains and do not wait for one another. Fixed when the"
        " log gets its first event; the SQLite file keeps one chain.", 16))
