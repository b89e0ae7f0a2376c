"""``fermix setup`` (init, show, review-interval: the config file alone, so they can mend a
config that keeps memory from opening) and ``fermix demo``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fermix_memory.entrypoints.api.memory_system import MemorySystem
from fermix_memory.entrypoints.cli.output import EXIT_ERROR, EXIT_OK, Output, UsageError


def _config_path(args: argparse.Namespace) -> Path:
    from fermix_memory.entrypoints.home import CONFIG_NAME, resolve_home

    return resolve_home(args.home) / CONFIG_NAME


def cmd_setup_review_interval(args: argparse.Namespace, out: Output) -> int:
    from fermix_memory.adapters.config_toml import set_review_interval

    path = _config_path(args)
    set_review_interval(path, args.hours)
    out.emit({"file": str(path), "review_interval_hours": args.hours},
             lambda r: [f"review_interval_hours = {r['review_interval_hours']:g} in {r['file']}"
                        + (" (background review disabled)" if r["review_interval_hours"] == 0 else "")])
    return EXIT_OK


def cmd_setup_init(args: argparse.Namespace, out: Output) -> int:
    """Write a default config.toml (unless there is one) and create the memory database."""
    from fermix_memory.adapters.config_toml import render_default_config
    from fermix_memory.entrypoints.home import DB_NAME
    from fermix_memory.entrypoints.storage import storage_url

    path = _config_path(args)
    had_config, had_db = path.exists(), (path.parent / DB_NAME).exists()
    if had_config and had_db:
        raise UsageError(f"{path} already exists; edit it, or use 'fermix setup review-interval'")
    if not had_config:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render_default_config(), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    with MemorySystem.open(path.parent) as memory:
        # Creates memory.db with the settings now in effect (an existing one is opened, and kept),
        # or, when a PostgreSQL URL is configured, migrates that database and leaves no memory.db.
        url = storage_url(memory.settings)
    out.emit({"file": str(path), "config_written": not had_config,
              "database": url or str(path.parent / DB_NAME), "database_created": url is None and not had_db},
             lambda r: [f"wrote {r['file']} (every knob at its default)" if r["config_written"]
                        else f"kept the existing {r['file']}",
                        f"created {r['database']}" if r["database_created"] else f"kept the existing {r['database']}"])
    return EXIT_OK


def settings_as_toml(settings: Any) -> dict[str, Any]:
    """The settings in effect as config.toml spells them (``"infinity"``, not ``null``), by section."""
    import attrs

    from fermix_memory.application.settings import SECTIONS, McpTokenSettings, ProviderSettings, ServerTokenSettings
    from fermix_memory.application.settings_checks import checks_of
    from fermix_memory.application.settings_retention import retention_as_toml

    def table(value: Any, cls: type[Any]) -> dict[str, Any]:
        checks = checks_of(cls)
        return {f.name: checks[f.name].type.to_toml(getattr(value, f.name)) for f in attrs.fields(cls)}

    data: dict[str, Any] = {name: table(getattr(settings, name), cls) for name, cls in SECTIONS.items()}
    data["providers"] = [table(p, ProviderSettings) for p in settings.providers]
    # A token's hash stays in config.toml: it would let anyone who sees it try guesses offline.
    data["mcp_tokens"] = [{**table(t, McpTokenSettings), "sha256": "(set)" if t.sha256 else ""}
                          for t in settings.mcp_tokens]
    data["server_tokens"] = [{**table(t, ServerTokenSettings), "sha256": "(set)" if t.sha256 else ""}
                             for t in settings.server_tokens]
    data.update(retention_as_toml(settings.retention))  # its policies are the array "retention.policy"
    return data


def _toml_lines(data: dict[str, Any]) -> list[str]:
    """``data`` as TOML text: one ``[fermix_core.SECTION]`` table per section, then the providers and
    the MCP tokens."""
    import tomlkit

    def knob(name: str, v: Any) -> str:
        return f"# {name} is not set" if v is None else f"{name} = {tomlkit.item(v).as_string()}"

    lines: list[str] = []
    arrays = ("providers", "mcp_tokens", "server_tokens", "retention.policy")
    for name, knobs in data.items():
        if name not in arrays:
            lines += ["", f"[fermix_core.{name}]"] + [knob(k, v) for k, v in knobs.items()]
    for name in arrays:
        for entry in data[name]:
            lines += ["", f"[[fermix_core.{name}]]"] + [knob(k, v) for k, v in entry.items()]
        if name == "providers" and not data["providers"]:
            lines += ["", "# no model provider: the reviewer uses the offline rules extractor"]
    return lines


def cmd_setup_show(args: argparse.Namespace, out: Output) -> int:
    from fermix_memory.adapters.config_toml import load_settings

    path = _config_path(args)
    settings = settings_as_toml(load_settings(path))
    out.emit({"file": str(path), "exists": path.exists(), "settings": settings},
             lambda r: [f"# the settings in effect, from {r['file']}"
                        + ("" if r["exists"] else " (not present: every default)"), *_toml_lines(r["settings"])])
    return EXIT_OK


# Full-text recall matches words: rows hold "home_city: Berlin", so without recall by meaning the
# demo asks in those words; with the [semantic] extra it asks as a person would (ADR-0043).
DEMO_QUESTION = "home city"
DEMO_QUESTION_BY_MEANING = "where does the user live"


DEMO_HOME = Path("fermix-demo")  # in the working folder, as the README's first command names it
DEMO_AGENT, DEMO_OWNER = "ada", "alice"  # the sample's
DEMO_MARK = "DEMO"  # written by the demo into a home it creates: the one kind of home it may reuse
DEMO_MARK_TEXT = ("This memory home was created by 'fermix demo' and holds only its sample.\n"
                  "The demo runs here again; delete the folder when you are done.\n")


def demo_home(given: str | None) -> Path:
    """The folder the demo runs in (ADR-0023): ``--home`` or ``./fermix-demo``, never
    ``$FERMIX_HOME`` or ``~/.fermix``. It must be new, empty (a ``config.toml`` alone is fine:
    a provider to try), or hold the demo's mark (ADR-0051: the mark alone says a folder is the
    demo's); anything else is refused, naming the folder and what it holds, and left as it is.
    A folder the demo may use gets its mark."""
    home = DEMO_HOME if given is None else Path(given).expanduser()
    try:
        held = sorted(p.name for p in home.iterdir()) if home.is_dir() else None
    except OSError as exc:
        raise UsageError(f"cannot read {home}: {exc.strerror or exc}") from None
    if home.exists() and held is None:
        raise UsageError(f"{home} is not a folder; 'fermix demo' runs in a folder of its own")
    if held and DEMO_MARK not in held and held != ["config.toml"]:
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        raise UsageError(f"{home} already holds data ({shown}) and was not created by 'fermix demo'; the demo"
                         f" never writes into such a folder: give --home a new folder (default ./{DEMO_HOME})")
    if not held or DEMO_MARK not in held:
        try:
            home.mkdir(parents=True, exist_ok=True)
            (home / DEMO_MARK).write_text(DEMO_MARK_TEXT, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot create the demo home {home}: {exc.strerror or exc}") from None
    return home


def _sample() -> str:
    from importlib.resources import files

    return files("fermix_memory").joinpath("samples/conversation.jsonl").read_text(encoding="utf-8")


def cmd_demo(args: argparse.Namespace, out: Output) -> int:
    """The whole loop on the embedded default, in a home of its own (:func:`demo_home`) and its own
    SQLite file, whatever database the environment or a config names, unless ``--database-url``
    names one (:func:`demo_memory`)."""
    from fermix_memory.entrypoints.cli.demo_store import demo_memory

    with demo_memory(demo_home(args.home), args.database_url) as memory:  # by meaning with the [semantic] extra
        return run_demo(memory, out, DEMO_QUESTION_BY_MEANING if memory.recalls_by_meaning else DEMO_QUESTION)


def run_demo(memory: MemorySystem, out: Output, question: str = DEMO_QUESTION) -> int:
    """Import the sample conversation shipped with the package, review it (the offline ``rules``
    extractor unless a provider is configured), show the prompt files, recall a fact, verify
    the log."""
    sample = _sample()
    agent, owner, conversation = DEMO_AGENT, DEMO_OWNER, "telegram:12345"
    imported = 0 if memory.history(agent, conversation) else len(memory.import_history(sample.splitlines()))
    reviews = memory.review_now(agent_id=agent, owner_id=owner, conversation=conversation)
    memory.fill_vectors()  # recall by meaning sees every row now (it is done in the background anyway)
    found = memory.recall(question, agent_id=agent, owner_id=owner, conversation=conversation,
                          source="all", limit=3)
    report = memory.verify()
    result = {
        "home": str(memory.home),
        "imported": imported,
        "reviews": reviews,
        "user_md": memory.prompt_file(agent, owner, "user_md").read_text(encoding="utf-8"),
        "memory_md": memory.prompt_file(agent, owner, "memory_md").read_text(encoding="utf-8"),
        "question": question,
        "recall_memories": [{"id": h.memory.id, "key": h.memory.key, "value": h.memory.value}
                            for h in found.memories],
        "recall_messages": [{"id": h.message.id, "snippet": h.snippet} for h in found.messages],
        "verified": report.ok,
        "events": report.events,
    }

    def human(r: dict[str, Any]) -> list[str]:
        lines = [f"home: {r['home']}", f"imported {r['imported']} sample messages"]
        for review in r["reviews"]:
            lines.append(f"review {review.conversation}: {review.status} {review.reason} "
                         f"({review.messages_reviewed} messages, {review.applied} applied, {review.refused} refused)")
        lines += ["", f"--- {memory.prompt_file(agent, owner, 'user_md')}", r["user_md"].rstrip(),
                  f"--- {memory.prompt_file(agent, owner, 'memory_md')}", r["memory_md"].rstrip(), "",
                  f"recall '{question}':"]
        lines += [f"  memory #{h['id']}: {h['key']}: {h['value']}" for h in r["recall_memories"]]
        lines += [f"  message #{h['id']}: {h['snippet']}" for h in r["recall_messages"]]
        lines.append(f"event log: {r['events']} events, verified={'yes' if r['verified'] else 'NO'}")
        return lines

    out.emit(result, human)
    return EXIT_OK if report.ok else EXIT_ERROR
