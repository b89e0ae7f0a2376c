"""The ``fermix`` command tree as one table: every runnable command's words, what it runs, how it
opens the memory (see :mod:`fermix_memory.entrypoints.cli`) and its arguments.

:func:`~fermix_memory.entrypoints.cli.parser.build_parser` builds the argparse parser from this
table and nothing else, so :func:`command_tree` (what tests and tools list the commands by)
cannot drift from what the parser accepts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import import_module
from typing import Any

import attrs

from fermix_memory.domain.values import INT64_MAX, Category

READ, WRITE, CONFIG, OWN = "read", "write", "config", "own"
# The module of each command's first word, imported when it runs: a name in
# fermix_memory.entrypoints.cli, or the full dotted path of another way in's module (``fermix mcp``
# is the MCP server's: the CLI never imports it, nor the MCP SDK, before the command runs).
MODULES = {"demo": "setup", "events": "events", "forget": "memory", "history": "history",
           "mcp": "fermix_memory.entrypoints.mcp.command", "memory": "memory", "resource": "resources",
           "retention": "retention",
           "serve": "fermix_memory.entrypoints.server.command", "setup": "setup", "storage": "moving",
           "memory search": "search", "memory embed": "search"}  # a command's own module, before its group's
# The read-only commands that run on the readers alone (entrypoints/reader.py, ADR-0063), never
# importing the writer side; the other reads open the whole memory read-only.
ON_READER = frozenset({("memory", "list"), ("memory", "show"), ("history", "show"), ("events", "head"),
                       ("events", "log"), ("resource", "list"), ("resource", "history"), ("resource", "show"),
                       ("resource", "diff")})


@attrs.frozen
class Option:
    """One argument of a command: ``flags`` are its option strings (``("--limit",)``), or its
    name alone for a positional argument (``("owner",)``)."""

    flags: tuple[str, ...]
    help: str
    type: Callable[[str], Any] | None = None
    default: object = None
    choices: tuple[str, ...] = ()
    required: bool = False
    switch: bool = False  # an on/off flag that takes no value (``--yes``)
    optional: bool = False  # a positional argument that may be left out
    metavar: str | None = None

    @property
    def positional(self) -> bool:
        return not self.flags[0].startswith("-")


@attrs.frozen
class Command:
    """One runnable command: ``fermix <words...> <options...>``. ``options`` include the ones every
    command accepts (``--home``, ``--json``)."""

    words: tuple[str, ...]
    access: str
    help: str
    options: tuple[Option, ...] = ()

    def function(self) -> Callable[..., int]:
        """What runs the command: ``cmd_<words>`` of its group's module (``fermix memory list``:
        ``memory.cmd_memory_list``), imported now, not at start-up."""
        name = MODULES.get(" ".join(self.words[:2]), MODULES[self.words[0]])
        module = import_module(name if "." in name else f"fermix_memory.entrypoints.cli.{name}")
        found: Callable[..., int] = getattr(module, "cmd_" + "_".join(self.words).replace("-", "_"))
        return found


# --- argument types ----------------------------------------------------------------------------------


def _path(text: str) -> str:
    if not text or "\x00" in text:
        raise argparse.ArgumentTypeError("a path must be non-empty, without NUL characters")
    return text


def _whole(text: str, minimum: int, rule: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
    if not minimum <= value <= INT64_MAX:  # SQLite cannot even compare with a larger number
        raise argparse.ArgumentTypeError(f"must be {rule}, at most {INT64_MAX}")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1, "a positive number")


def _position(text: str) -> int:
    return _whole(text, 0, "a position (0 or more)")


def _count(text: str) -> int:
    """How many at most (``--limit``): 0 asks for none."""
    return _whole(text, 0, "0 or more")


def _id(text: str) -> int:
    return _positive(text)


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of hours") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("hours must be 0 (off) or more")
    return value


def _host_port(text: str) -> tuple[str, int]:
    """``PORT`` (on 127.0.0.1), ``HOST:PORT`` or ``[IPV6]:PORT``."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") if sep else "127.0.0.1"
    if not host or "\x00" in host:
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not HOST:PORT")
    if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:60]!r}: the port must be a number from 1 to 65535")
    return host, int(port)


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:60]!r}: the port must be a number from 0 to 65535")
    return int(text)


def _event_kind(text: str) -> str:
    from fermix_memory.domain.events import EVENTS_BY_KIND

    if text in EVENTS_BY_KIND:
        return text
    from difflib import get_close_matches

    close = get_close_matches(text, EVENTS_BY_KIND, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise argparse.ArgumentTypeError(f"unknown event kind {text[:60]!r}; {hint}known kinds: "
                                     + ", ".join(sorted(EVENTS_BY_KIND)))


# --- the table ---------------------------------------------------------------------------------------

COMMON = (
    Option(("--home",), "memory home folder (default: $FERMIX_HOME, else ~/.fermix)", type=_path),
    Option(("--json",), "print one JSON document on stdout (and errors as JSON on stderr)", switch=True),
)
GROUPS = {  # the help of each group of commands
    "events": "the event log: verify, head, replay, log, export, import, receipt, verify-receipt",
    "history": "conversation history: import, show, compact, export",
    "memory": "memory rows: list, show, search, embed, review, set, archive, restore",
    "setup": "the config file: init, show, review-interval",
    "resource": "versioned prompt files: list, history, show, diff, rollback",
    "retention": "the retention policies of config.toml: status, run",
    "storage": "where the memory is stored: migrate",
}
_AGENT = Option(("--agent",), "agent id (needed when several agents have prompt files)")
_OWNER = Option(("--owner",), "owner id (needed when several owners have prompt files)")
_NAME = Option(("name",), "the prompt file: user_md (USER.md) or memory_md (MEMORY.md)",
               choices=("user_md", "memory_md"))
_CONVERSATION = "CHANNEL:CHAT_ID[:THREAD]"
_AS_OF = "TIME"
_CHAINS = Option(("--chains",), "link the events onto this many hash chains instead of the log's own (ADR-0031;"
                 " e.g. 16 when a home moves to PostgreSQL for many writers): an empty target only, and the old"
                 " log's anchors do not apply to the new one", type=_positive, metavar="N")
_CATEGORIES = tuple(c.value for c in Category)
DEFAULT_REVIEW_ROUNDS = 25  # batches of review_max_messages each: 1,000 messages at the default 40

COMMANDS: tuple[Command, ...] = (
    Command(("demo",), OWN, "run the whole loop on the sample conversation shipped with the package, in a"
            " folder of its own: ./fermix-demo, or --home naming a new folder or one the demo made (ADR-0023), and"
            " in that folder's SQLite file, whatever database FERMIX_DATABASE_URL or a config names (ADR-0051)", (
        Option(("--database-url",), "run in this PostgreSQL database instead: one holding no events, or only"
               " those this demo folder wrote there", metavar="URL"),
    )),
    Command(("events", "verify"), READ, "check the hash chain and the projections (read-only)", (
        Option(("--expect-head",), "a head printed earlier by 'events head': the log must still hold it"
               " (default: none)", metavar="POSITION:HASH"),
    )),
    Command(("events", "head"), READ, "print the log's last POSITION:HASH, to keep elsewhere", (
        Option(("--public-key",), "print the home's public key instead (receipts are checked with it)", switch=True),)),
    Command(("events", "replay"), READ, "rebuild every projection from the log into a new folder", (
        Option(("--into",), "folder for the rebuilt memory.db (must not hold one)", type=_path, required=True),
    )),
    Command(("events", "log"), READ, "print events in log order (redacted ones show as such)", (
        Option(("--after",), "only events after this position", type=_position, default=0),
        Option(("--limit",), "print at most this many events", type=_count, default=100),
        Option(("--kind",), "only events of this kind, e.g. memory.added (an unknown kind is an error)",
               type=_event_kind),
    )),
    Command(("events", "export"), READ, "write the log as JSON Lines, chain included, to move it to another home"
            " (ADR-0030); the same log always gives the same bytes", (
        Option(("file",), "the file to write, '-' for standard output", type=_path),
        Option(("--encrypted",), "seal owners' payloads with HOME/keys (forget destroys them)", switch=True))),
    Command(("events", "receipt"), READ, "write the signed receipt of an erasure (ADR-0079)", (
        Option(("position",), "the receipt's event, or the erasure record's", type=_positive),
        Option(("--output", "-o"), "the receipt file to write (default: standard output)", type=_path))),
    Command(("events", "verify-receipt"), OWN, "check a receipt: its signature, and that the log bears it out", (
        Option(("file",), "the receipt file", type=_path),
        Option(("--log",), "check against this 'events export' file, not the home's log", type=_path),
        Option(("--public-key",), "the key to trust, ed25519:HEX or a file of it (default: the home's)",
               metavar="KEY_OR_FILE"))),
    Command(("events", "import"), OWN, "append an exported log into an empty home (created if missing),"
            " projections and prompt files rebuilt; the whole file is checked first, any problem names its line"
            " and nothing is written", (
        Option(("file",), "the event file, '-' for standard input", type=_path),
        Option(("--resume",), "accept a home that holds events when its log is a prefix of the file's (an"
               " import that was cut off): only the rest is appended", switch=True),
        _CHAINS,
        Option(("--keys",), "an encrypted export's keys folder (default: HOME/keys)", type=_path, metavar="DIR"))),
    Command(("forget",), WRITE, "erase everything an owner left (messages, facts, files, jobs), one memory row"
            " (--memory ID: every event that carried its value, the prompt files re-rendered) or one conversation"
            " (--conversation: its messages, checkpoints, reviews and the facts learnt only from it)", (
        Option(("owner",), "the owner id to forget (not with --memory or --conversation)", optional=True),
        Option(("--memory",), "erase this memory row instead of an owner", type=_id, metavar="ID"),
        Option(("--conversation",), f"erase this conversation of --agent instead of an owner, {_CONVERSATION}",
               metavar="CH:ID[:THREAD]"),
        Option(("--dry-run",), "only list what would go (an owner, --memory or --conversation), changing nothing;"
               " no --yes needed", switch=True),
        Option(("--agent",), "only what they left with this agent (default: every agent); with --conversation,"
               " whose conversation it is"),
        Option(("--reason",), "kept in the record of the erasure (no content of the owner's)"),
        Option(("--yes",), "required: the erasure cannot be undone", switch=True),
        Option(("--receipt",), "also write the erasure's signed receipt to this file", type=_path, metavar="FILE"))),
    Command(("history", "import"), OWN,
            "import messages from a JSON Lines file: every line is checked first, then all or nothing;"
            " messages imported before are skipped", (
        Option(("file",), "the JSON Lines file, '-' for standard input (UTF-8, a BOM is fine)", type=_path),
    )),
    Command(("history", "compact"), WRITE, "compact a conversation's window now, as the operator's /compact does:"
            " older messages summarised into a checkpoint (they stay in the log and in search)", (
        Option(("conversation",), f"the conversation, {_CONVERSATION}", metavar="CH:ID[:THREAD]"),
        Option(("--agent",), "the agent whose conversation it is", required=True),
        Option(("--context-window",), "the chat model's context window in tokens, to size the kept part"
               " (default: the configured one)", type=_positive),
    )),
    Command(("history", "show"), READ, "read a conversation's stored messages (those compaction summarised too),"
            " a page at a time, oldest first: the newest page, the one before or after a message, or the Nth", (
        Option(("conversation",), f"the conversation, {_CONVERSATION}", metavar="CH:ID[:THREAD]"),
        Option(("--agent",), "the agent whose conversation it is", required=True),
        Option(("--owner",), "only this owner's messages (default: every owner's)"),
        Option(("--limit",), "at most this many messages per page", type=_count, default=20),
        Option(("--before",), "the page just before this message id", type=_id, metavar="ID"),
        Option(("--after",), "the page just after this message id", type=_id, metavar="ID"),
        Option(("--page",), "the Nth page counted from the newest (1: the newest)", type=_positive, metavar="N"),
    )),
    Command(("history", "export"), READ, "export messages as JSON Lines", (
        Option(("--agent",), "only this agent's messages (default: every agent)"),
        Option(("--output", "-o"), "file to write (default: standard output)", type=_path),
    )),
    Command(("mcp",), OWN, "serve the memory tools, prompt files and memory block over MCP: on stdio for a"
            " desktop client, or over streamable HTTP with bearer tokens (ADR-0025; needs the [mcp] extra)", (
        Option(("--agent",), "stdio: the agent the client talks to (default: [fermix_core.mcp] agent_id)"),
        Option(("--owner",), "stdio: the owner it speaks as (default: [fermix_core.mcp] owner_id)"),
        Option(("--conversation",), f"stdio: the conversation every chat shares, {_CONVERSATION}"
               " (default: [fermix_core.mcp] conversation)"),
        Option(("--trust",), "stdio: guest or operator (default: [fermix_core.mcp] trust)",
               choices=("guest", "operator")),
        Option(("--http",), "serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; PORT alone binds"
               " 127.0.0.1; each request needs a bearer token of [[fermix_core.mcp_tokens]]; a HOST other than"
               " loopback needs --insecure-bind", type=_host_port, metavar="[HOST:]PORT"),
        Option(("--insecure-bind",), "allow --http on a non-loopback address: the server speaks plain HTTP (no"
               " TLS), so tokens and memory cross the network unencrypted; prefer 127.0.0.1 behind a TLS proxy",
               switch=True),
    )),
    Command(("serve",), OWN, "the memory server: the HTTP API under /v1 for hosts in any language, with bearer"
            " tokens bound to roles (ADR-0073; needs the [server] extra)", (
        Option(("--host",), "the address to bind (default: 127.0.0.1); another needs TLS or --insecure-bind",
               default="127.0.0.1"),
        Option(("--port",), "the port to listen on (default: 8765; 0 picks a free one)", type=_port, default=8765),
        Option(("--token-env",), "also accept the operator token held by this environment variable",
               metavar="VAR"),
        Option(("--tls-cert",), "serve HTTPS with this certificate file (PEM)", type=_path),
        Option(("--tls-key",), "the private key of --tls-cert (PEM)", type=_path),
        Option(("--insecure-bind",), "allow a non-loopback --host without TLS, on a network you trust", switch=True),
        Option(("--max-body",), f"the largest request body in bytes (default: {1 << 20:,})", type=_positive),
        Option(("--print-openapi",), "print the API's OpenAPI document and exit", switch=True),
    )),
    Command(("memory", "list"), READ, "list memory rows", (
        Option(("--agent",), "only this agent's rows (default: every agent)"),
        Option(("--owner",), "only this owner's rows (default: every owner)"),
        Option(("--active",), "leave out archived rows", switch=True),
        Option(("--as-of",), "the rows as they were at this moment, folded from the log: an ISO 8601 time with"
               " its zone, e.g. 2026-11-02T10:00Z (before the first event: none)", metavar=_AS_OF),
    )),
    Command(("memory", "show"), READ, "a row and the events and messages behind it", (
        Option(("id",), "the memory row id", type=_id),
    )),
    Command(("memory", "embed"), OWN, "compute the vectors that messages and memory rows still wait for (after"
            " 'history import', 'events import' or 'storage migrate'), so that search by meaning sees them; each"
            " batch is committed, so an interrupted run keeps what it stored and the next run goes on from there"
            " (needs the [semantic] extra)"),
    Command(("memory", "search"), READ, "search memory rows and/or messages as a reader would, by words (keyword),"
            " by meaning (semantic) or both (hybrid); each hit shows its scores", (
        Option(("query",), "what to look for"),
        Option(("--agent",), "the agent searching", required=True),
        Option(("--owner",), "the owner it searches for", required=True),
        Option(("--conversation",), f"the reader's conversation, {_CONVERSATION}"),
        Option(("--scope",), "which rows the reader may see", choices=("current", "owner", "all"), default="current"),
        Option(("--source",), "search memory rows, messages, or both", choices=("memories", "history", "all"),
               default="memories"),
        Option(("--limit",), "at most this many hits of each source", type=_count, default=10),
        Option(("--mode",), "match by the words, by meaning (needs the [semantic] extra), or both; default:"
               " hybrid when recall by meaning is on ([fermix_core.memory] recall_by_meaning: by default"
               " when the extra is installed), else keyword",
               choices=("keyword", "semantic", "hybrid")),
        Option(("--as-of",), "the moment the question is asked at (ISO 8601 with an offset): days such as"
               " 'yesterday' or 'last weekend' in the query count back from it; default: the newest message"
               " searched"),
    )),
    Command(("memory", "review"), WRITE, "review conversations with new messages now, batch after batch until"
            " each is caught up", (
        Option(("--now",), "past the interval and back-off gates (required)", switch=True),
        Option(("--conversation",), f"only this conversation, {_CONVERSATION}"),
        Option(("--agent",), "only this agent's conversations (default: every agent)"),
        Option(("--owner",), "only this owner's conversations (default: every owner)"),
        Option(("--max-rounds",), "at most this many reviews (batches) per conversation; what is left is"
               " counted and stays queued", type=_positive, default=DEFAULT_REVIEW_ROUNDS),
        Option(("--verbose",), "also print the library's warnings in full (each provider's whole error)",
               switch=True),
    )),
    Command(("memory", "set"), WRITE, "add a value, or replace the owner's value under that key, as the operator"
            " (through admission; the scope follows the category: owner for identity, preference, interest,"
            " goal; agent for context, directive)", (
        Option(("--agent",), "the agent id", required=True),
        Option(("--owner",), "the owner id", required=True),
        Option(("--category",), "the row's category", choices=_CATEGORIES, required=True),
        Option(("--key",), "the row's key (normalised: 'home city' is home_city)", required=True),
        Option(("value",), "the value to store"),
        Option(("--reason",), "kept in the event's provenance"),
        Option(("--expires-at",), "when the retention run erases the row: ISO 8601 with an offset, e.g."
               " 2027-03-01T09:00Z ('never' takes an expiry off; left out, a replaced row keeps its own)"),
    )),
    Command(("memory", "archive"), WRITE, "archive a memory row as the operator (kept, restorable with 'memory"
            " restore', out of the prompt files; an archived row is left as it is: 'already archived', exit 0)", (
        Option(("id",), "the memory row id", type=_id),
        Option(("--reason",), "why (kept with the row and in its event)"),
    )),
    Command(("memory", "restore"), WRITE,
            "un-archive a memory row and rebuild the prompt files (an active row is left as it is:"
            " 'already active', exit 0)", (
        Option(("id",), "the memory row id", type=_id),
    )),
    Command(("setup", "init"), CONFIG,
            "create the memory home: a config.toml with every knob at its default, and memory.db"),
    Command(("setup", "show"), CONFIG, "the settings in effect"),
    Command(("setup", "review-interval"), CONFIG,
            "set the background review interval in hours (0 disables it; --now still works);"
            " the rest of config.toml, comments included, is kept", (
        Option(("hours",), "hours between background reviews; 0 turns them off", type=_hours),
    )),
    Command(("resource", "list"), READ, "the current revision of every resource", (
        _AGENT, _OWNER,
    )),
    Command(("resource", "history"), READ, "revisions of a resource, newest first", (
        _AGENT, _OWNER, _NAME, Option(("--limit",), "at most this many revisions", type=_count, default=20),
    )),
    Command(("resource", "show"), READ, "the content of one revision, or of the one current at a moment", (
        _AGENT, _OWNER, _NAME, Option(("rev",), "the revision number (or give --as-of)", type=_id, optional=True),
        Option(("--as-of",), "the revision that was current at this moment: an ISO 8601 time with its zone, e.g."
               " 2026-11-02T10:00Z (before the file's first revision: empty)", metavar=_AS_OF),
    )),
    Command(("resource", "diff"), READ, "unified diff between two revisions", (
        _AGENT, _OWNER, _NAME, Option(("a",), "the older revision", type=_id),
        Option(("b",), "the newer revision", type=_id),
    )),
    Command(("resource", "rollback"), WRITE, "restore a revision's text as a new revision (the rows stay, so the"
            " next rebuild overwrites it), or with --rows the memory rows it was rendered from", (
        _AGENT, _OWNER, _NAME, Option(("rev",), "the revision whose content comes back", type=_id),
        Option(("--rows",), "restore the memory rows of that revision (as memory events, through admission) and"
               " render the file from them, so rebuilds keep it", switch=True),
    )),
    Command(("retention", "status"), READ, "what each retention policy makes due now and when the next falls due", (
        Option(("--dry-run",), "also list what a run now would erase (conversation keys, memory ids)", switch=True),)),
    Command(("retention", "run"), WRITE, "erase now what the retention policies make due, as forget erases it", (
        Option(("--dry-run",), "only list what would go, changing nothing", switch=True),)),
    Command(("storage", "migrate"), READ, "copy this home's log into another home in one stream (export and"
            " import, ADR-0030), then verify the target and print both heads", (
        Option(("--to",), "the target: a home folder (created if missing) or a postgresql://USER@HOST/DB URL"
               " (the password from PGPASSWORD or ~/.pgpass)", required=True, metavar="TARGET"),
        Option(("--resume",), "finish a migration that was cut off (a target holding a prefix of this log, which"
               " nothing else opens meanwhile): only the rest is copied", switch=True),
        _CHAINS,
    )),
)  # fmt: skip


def command_tree() -> tuple[Command, ...]:
    """Every runnable command, in the order of ``fermix --help``, with all the options it accepts
    (the common ``--home`` and ``--json`` first; ``--help`` is argparse's own)."""
    return tuple(attrs.evolve(c, options=(*COMMON, *c.options)) for c in COMMANDS)
