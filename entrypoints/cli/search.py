"""``fermix memory search`` (by words, by meaning or both, each hit with its score) and ``fermix
memory embed`` (the vectors that texts still wait for, computed now)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fermix_memory.application.embedder import label_of
from fermix_memory.application.query_ports import MemoryHit, MessageHit
from fermix_memory.entrypoints.api.memory_system import MemorySystem
from fermix_memory.entrypoints.cli.memory import scope_text
from fermix_memory.entrypoints.cli.output import EXIT_OK, Output, one_line, plural, progress_bars

EXIT_INTERRUPTED = 130  # as a shell reports a command ended by Ctrl-C (128 + SIGINT)


def waiting_line(waiting: int) -> str:
    """What a search by meaning says when texts still wait for their vectors (it cannot see them)."""
    return (f"fermix: warning: {plural(waiting, 'text')} still wait for their vectors and are not searched by"
            " meaning yet; run 'fermix memory embed' to compute them now")


def _score(hit: MemoryHit | MessageHit, by_meaning: bool) -> str:
    """After a hit of a search by meaning: its cosine similarity to the query, or that only its
    words matched (a hybrid search); nothing after a search by words alone (its rank is in --json)."""
    if hit.similarity is not None:
        return f"  [similarity {hit.similarity:.2f}]"
    return "  [by words]" if by_meaning else ""


def _hit_line(hit: MemoryHit | MessageHit, by_meaning: bool) -> str:
    if isinstance(hit, MemoryHit):
        m = hit.memory
        line = f"memory {m.id} ({scope_text(m.scope_type, m.scope_id)}): {m.key} = {m.value}"
    else:
        reply = f" reply to {hit.context_of}" if hit.context_of is not None else ""
        line = f"message {hit.message.id} ({hit.message.conversation}){reply}: {hit.snippet}"
    return one_line(line + _score(hit, by_meaning))


def cmd_memory_search(memory: MemorySystem, args: argparse.Namespace, out: Output) -> int:
    result = memory.recall(args.query, agent_id=args.agent, owner_id=args.owner, conversation=args.conversation,
                           scope=args.scope, source=args.source, limit=args.limit, mode=args.mode,
                           as_of=args.as_of)
    if result.vectors_waiting and not out.as_json:  # with --json: the document's vectors_waiting
        sys.stderr.write(waiting_line(result.vectors_waiting) + "\n")
    by_meaning = result.vectors_waiting is not None
    out.emit(result, lambda r: [_hit_line(h, by_meaning) for h in r.ranked] or ["nothing found"])
    return EXIT_OK


def cmd_memory_embed(args: argparse.Namespace, out: Output) -> int:
    """Open the home with the [semantic] extra's model (whatever its settings say: the operator
    asked) and embed what waits, batch by batch, on this thread, with a progress bar."""
    from fermix_memory.adapters.embedding import load_embedder  # the extra's, only now

    embedder = load_embedder()  # SemanticRecallUnavailable (one line, exit 1) without the extra
    done = [0]
    with MemorySystem.open(args.home, create=False, embedder=embedder) as memory:
        with progress_bars("embedding") as (bar,):
            def progress(stored: int, total: int) -> None:
                done[0] = stored
                bar(stored, total)

            try:
                stored = memory.embed_waiting(progress)
            except KeyboardInterrupt:  # each batch committed on its own: what was stored stays
                bar.close()
                sys.stderr.write(f"fermix: interrupted: {plural(done[0], 'vector')} stored and kept;"
                                 " run 'fermix memory embed' again to go on\n")
                return EXIT_INTERRUPTED
        waiting = memory.vectors_waiting()
    report: dict[str, Any] = {"stored": stored, "waiting": waiting, "label": label_of(embedder)}
    out.emit(report, lambda r: [f"{plural(r['stored'], 'vector')} stored; {plural(r['waiting'], 'text')}"
                                f" still wait ({r['label']})"])
    return EXIT_OK

