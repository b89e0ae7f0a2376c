"""Which failures of a write say that its PostgreSQL session is gone (a write not yet committing
then runs again on a new connection): a broken or closed connection, libpq's own errors, and the
codes a server sends as it ends a session, even before libpq has read the end of the stream."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import pytest
from psycopg import errors

from fermix_memory.adapters.postgres.connection import session_lost


@dataclass
class Conn:
    broken: bool = False
    closed: bool = False


@pytest.mark.parametrize("exc", [
    psycopg.OperationalError("flushing failed: server closed the connection unexpectedly"),
    psycopg.InterfaceError("the connection is lost"),
    errors.AdminShutdown("terminating connection due to administrator command"),
    errors.CrashShutdown("terminating connection because of crash of another server process"),
    errors.CannotConnectNow("the database system is shutting down"),
    errors.ConnectionFailure("connection failure"),
])
def test_the_connections_own_failures_and_a_session_ended_by_the_server_are_lost(exc: Exception) -> None:
    assert session_lost(Conn(), exc)


@pytest.mark.parametrize("exc", [
    errors.QueryCanceled("canceling statement due to statement timeout"),
    errors.UniqueViolation("duplicate key value"),
    errors.SerializationFailure("could not serialize access"),
    errors.DiskFull("could not extend file"),
    ValueError("not the driver's"),
])
def test_a_statements_failure_on_a_live_session_is_not(exc: Exception) -> None:
    assert not session_lost(Conn(), exc)


def test_any_failure_on_a_broken_or_closed_connection_is() -> None:
    assert session_lost(Conn(broken=True), ValueError("anything"))
    assert session_lost(Conn(closed=True), errors.OperationalError("x"))
    assert not session_lost(Conn(closed=True), ValueError("not the driver's"))
