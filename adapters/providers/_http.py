"""HTTP plumbing shared by the provider adapters: one JSON POST, error mapping, retries, redaction.

Failures become :class:`ModelUnavailable` (timeouts, connection errors, 408, 429, 5xx: worth
another attempt or another provider) or :class:`ModelBadResponse` (any other 4xx, a body that
is not a JSON object). Messages name the provider, URL and status, never the API key: response
snippets are redacted, and the httpx exception is not chained because its request carries the
auth header.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from fermix_memory.adapters.providers._params import ProviderRejected, attempts_of, error_details
from fermix_memory.application.errors import ModelBadResponse, ModelError, ModelUnavailable

log = logging.getLogger("fermix_memory.providers")

MAX_RETRY_SLEEP_S = 1.0  # a route falls back to the next provider rather than wait longer
_SNIPPET_CHARS = 200
_backoff = wait_exponential(multiplier=0.05, max=MAX_RETRY_SLEEP_S)


class ProviderUnavailable(ModelUnavailable):
    """:class:`ModelUnavailable` with the server's ``Retry-After`` hint in seconds, if it sent one."""

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


def _wait(state: RetryCallState) -> float:
    # Honour Retry-After, but never sleep past the cap: the route has fallbacks for a long outage.
    delay = _backoff(state)
    exc = state.outcome.exception() if state.outcome is not None else None
    if isinstance(exc, ProviderUnavailable) and exc.retry_after_s is not None:
        delay = max(delay, exc.retry_after_s)
    return min(delay, MAX_RETRY_SLEEP_S)


def _retry_after(value: str | None) -> float | None:
    # Only the delta-seconds form; an HTTP-date would exceed the cap anyway.
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


class JsonPoster:
    """POSTs a JSON body to one provider endpoint, retrying unavailability, and returns the JSON object."""

    def __init__(
        self,
        provider: str,
        url: str,
        headers: Mapping[str, str],
        *,
        secret: str | None,
        retries: int,
        client: httpx.Client | None,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.provider = provider
        self.url = url
        self._headers = dict(headers)
        self._secret = secret or None
        self._retries = retries
        self._owns_client = client is None
        self._client = client if client is not None else httpx.Client()

    def post(self, body: Mapping[str, Any], timeout_s: float) -> tuple[dict[str, Any], int]:
        """The answer's JSON object and how many HTTP requests it took.

        A failure carries that count too, as ``exc.attempts``, for the call's trace.
        """
        retrying = Retrying(
            retry=retry_if_exception_type(ModelUnavailable),
            stop=stop_after_attempt(self._retries + 1),
            wait=_wait,
            before_sleep=self._log_retry,
            reraise=True,
        )
        attempts = 0

        def once() -> dict[str, Any]:
            nonlocal attempts
            attempts += 1
            return self._post_once(body, timeout_s)

        try:
            result: dict[str, Any] = retrying(once)
        except ModelError as exc:
            exc.attempts = attempts  # type: ignore[attr-defined]
            raise
        return result, attempts

    def post_adapting(
        self,
        build: Callable[[], dict[str, Any]],
        learn: Callable[[ModelError, dict[str, Any]], str | None],
        timeout_s: float,
    ) -> tuple[dict[str, Any], int, tuple[str, ...]]:
        """POST ``build()``; when ``learn`` can adapt to a refusal (it returns a note), rebuild
        and POST again. Returns the answer, the HTTP requests made in all, and the notes.

        ``learn`` must make each adaptation once only, so the loop ends.
        """
        attempts = 0
        notes: list[str] = []
        while True:
            body = build()
            try:
                data, used = self.post(body, timeout_s)
            except ModelError as exc:
                attempts += attempts_of(exc)
                note = learn(exc, body)
                if note is None:
                    exc.attempts = attempts  # type: ignore[attr-defined]
                    raise
                notes.append(note)
                log.warning("provider %r: %s", self.provider, note)
                continue
            return data, attempts + used, tuple(notes)

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def redact(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _post_once(self, body: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        where = f"provider {self.provider!r} ({self.url})"
        try:
            response = self._client.post(
                self.url, json=body, headers=self._headers, timeout=httpx.Timeout(timeout_s)
            )
        except httpx.TimeoutException as exc:
            raise ProviderUnavailable(
                f"{where}: timed out after {timeout_s:g} s ({type(exc).__name__})"
            ) from None
        except httpx.TransportError as exc:
            raise ProviderUnavailable(
                f"{where}: connection error ({type(exc).__name__}: {self.redact(str(exc))})"
            ) from None
        except httpx.HTTPError as exc:
            raise ModelBadResponse(f"{where}: {type(exc).__name__}: {self.redact(str(exc))}") from None

        status = response.status_code
        if status == 408 or status == 429 or status >= 500:
            raise ProviderUnavailable(
                f"{where}: HTTP {status}: {self._snippet(response)}",
                status=status,
                retry_after_s=_retry_after(response.headers.get("retry-after")),
            )
        if status >= 300:
            try:
                message, param = error_details(response.json())
            except ValueError:
                message, param = "", None
            raise ProviderRejected(
                f"{where}: HTTP {status}: {self._snippet(response)}",
                status=status,
                error_text=self.redact(message) or self._snippet(response),
                param=param,
            )
        try:
            data = response.json()
        except ValueError:
            raise ModelBadResponse(f"{where}: body is not JSON: {self._snippet(response)}") from None
        if not isinstance(data, dict):
            raise ModelBadResponse(f"{where}: body is JSON but not an object: {self._snippet(response)}")
        return data

    def _snippet(self, response: httpx.Response) -> str:
        # Redact the whole body before cutting it, so no prefix of the key survives the cut.
        text = " ".join(self.redact(response.content.decode("utf-8", "replace")).split())
        return (text[:_SNIPPET_CHARS] + "…") if len(text) > _SNIPPET_CHARS else (text or "<empty body>")

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        sleep = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "attempt %d of %d failed: %s; retrying in %.2f s",
            state.attempt_number,
            self._retries + 1,
            exc,
            sleep,
        )


def int_field(mapping: Any, key: str) -> int:
    """A non-negative token count from a usage object, 0 when absent (some servers omit usage)."""
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
