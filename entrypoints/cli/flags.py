"""Unknown options, named before argparse parses anything.

argparse sets an unknown option aside and goes on: ``fermix --hom X memory list`` then reads
``X`` as the command and complains about that, never about ``--hom``. This check runs first
and names the option the command does not know, with the one it probably meant.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

ALWAYS = frozenset({"-h", "--help", "--version"})


def _is_option(token: str) -> bool:
    """An option string: ``-x``, ``--name``, ``--name=value``; not ``-``, not a negative number."""
    return token.startswith("-") and len(token) > 1 and not (token[1].isdigit() or token[1] == ".")


def command_words(argv: Sequence[str], prefixes: Collection[tuple[str, ...]]) -> tuple[str, ...]:
    """The command's words among ``argv`` (its positional tokens that continue a known command)."""
    words: tuple[str, ...] = ()
    for token in argv:
        if not token.startswith("-") and (*words, token) in prefixes:
            words = (*words, token)
    return words


def _known(words: tuple[str, ...], commands: Mapping[tuple[str, ...], Collection[str]]) -> set[str]:
    """The options of the command ``words`` names; when it names none yet (``fermix memory``),
    those of every command it begins, so a later error says what is missing instead."""
    if words in commands:
        return {*ALWAYS, *commands[words]}
    return {*ALWAYS, *(flag for w, flags in commands.items() if w[: len(words)] == words for flag in flags)}


def unknown_option(argv: Sequence[str], commands: Mapping[tuple[str, ...], Collection[str]],
                   common: Collection[str]) -> str | None:
    """One line naming the first option in ``argv`` (before any ``--``) that its command does not
    take, or ``None``. ``commands`` maps each command's words to its options; ``common`` are
    the options every command takes."""
    args = list(argv[: list(argv).index("--")] if "--" in argv else argv)
    prefixes = {w[:n] for w in commands for n in range(1, len(w) + 1)}
    words = command_words(args, prefixes)
    known = _known(words, commands) | set(common)
    for token in args:
        flag = token.split("=", 1)[0]
        if not _is_option(token) or flag in known or (not token.startswith("--") and token[:2] in known):
            continue  # ``-oFILE``: a short option and its value in one token
        from difflib import get_close_matches

        longer = sorted(k for k in known if k.startswith(flag) and flag.startswith("--"))
        close = longer if len(longer) == 1 else get_close_matches(flag, sorted(known), n=1, cutoff=0.7)
        hint = (f" (did you mean {close[0]}?)" if close
                else "; a value that starts with '-' goes after '--' or as --option=VALUE")
        where = " ".join(("fermix", *words))
        return f"unknown option {flag[:60]} for '{where}'{hint} (see '{where} --help')"
    return None
