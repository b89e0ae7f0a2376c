"""Every operation of ``/v1``, in the order the OpenAPI document lists them (ADR-0073)."""

from __future__ import annotations

from fermix_memory.entrypoints.server.endpoints import ENDPOINTS, Endpoint
from fermix_memory.entrypoints.server.operator_reads import OPERATOR_READS

OPERATIONS: tuple[Endpoint, ...] = ENDPOINTS + OPERATOR_READS
