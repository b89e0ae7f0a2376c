"""Where a server of ``fermix`` listens: loopback or not, and a socket bound before serving
(``fermix mcp --http`` and ``fermix serve``)."""

from __future__ import annotations

import errno
import ipaddress
import socket

from fermix_memory.domain.errors import FermixError


class CannotListen(FermixError):
    """A server cannot or will not listen where it was asked to (one line for the operator)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int, *, option: str = "--port") -> socket.socket:
    """A listening socket on ``host:port``, or :class:`CannotListen` in one line (a port in use,
    an address this machine does not have; ``option`` is the flag that chooses another port).
    Bound here, before serving, so the server never starts on a port it cannot hold, and no
    other process can take it in between."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (OSError, UnicodeError) as exc:
        raise CannotListen(f"cannot listen on {shown}: {getattr(exc, 'strerror', None) or exc}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: restart past TIME_WAIT
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CannotListen(f"cannot listen on {shown}: the port is already in use by another program;"
                               f" choose another with {option}") from None
        raise CannotListen(f"cannot listen on {shown}: {exc.strerror or exc}") from None
    return sock
