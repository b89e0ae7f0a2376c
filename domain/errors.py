"""Errors raised by the pure domain when a value cannot exist."""

from __future__ import annotations


class FermixError(Exception):
    """Base class of every error fermix-memory raises on purpose."""


class DomainError(FermixError, ValueError):
    """Base class of every error the domain raises for bad input."""


class InvalidArgument(DomainError):
    """An argument has the wrong type or an unusable value (when no narrower error fits)."""


class InvalidIdentifier(DomainError):
    """An agent id, owner id, key or other identifier is empty, too long or malformed."""


class InvalidNumber(DomainError):
    """A count, limit, position or numeric id is not a whole number SQLite can store, or is out of range."""


class InvalidConversationKey(DomainError):
    """A conversation key (or its ``CHANNEL:CHAT_ID[:THREAD]`` spelling) is malformed."""


class InvalidOperation(DomainError):
    """A memory operation is malformed (unknown op, missing field, wrong type)."""


class ReviewerAnswerError(DomainError):
    """A reviewer answer is neither ``Nothing to save.`` nor one valid operations object.

    ``str()`` may end by quoting the answer (``quoted``: what helps the model repair it);
    ``without_answer`` says what was wrong without any of the answer's words, for records
    that outlive the review (a model echoing the conversation would quote the owner)."""

    def __init__(self, message: str, quoted: str = "") -> None:
        super().__init__(message + quoted)
        self.without_answer = message + (ANSWER_LEFT_OUT if quoted else "")


ANSWER_LEFT_OUT = "(the answer's text is left out)"
