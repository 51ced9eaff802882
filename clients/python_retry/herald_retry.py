"""Enqueue through the generated client (`clients/python`) the way herald's contract asks.

One idempotency key per notification, made once and sent again on every retry, so that a retry
after a lost answer is answered with the first notification instead of making a second. A retry
happens only where herald says one is safe: `429` and `503` after the `Retry-After` they carry,
other `5xx` answers and lost connections after a growing pause with jitter. Every other answer,
a `202` or a `422` alike, is returned as it came.

    from herald_client import AuthenticatedClient
    from herald_retry import send

    client = AuthenticatedClient(base_url="http://127.0.0.1:8080", token=TOKEN)
    sent = send(client, NotificationRequest(...), idempotency_key="export-42")
    sent.response.parsed.id
"""

from __future__ import annotations

import dataclasses
import email.utils
import random
import time
import uuid
from typing import Callable

import httpx

from herald_client import errors
from herald_client.api.notifications import enqueue_notification
from herald_client.models import NotificationRequest
from herald_client.types import Response

# The answers herald gives when the same request may succeed later.
RETRYABLE = frozenset({429, 500, 502, 503, 504})


@dataclasses.dataclass
class Sent:
    """The answer that ended the sending, the key every try carried, and how many tries it took."""

    key: str
    response: Response
    tries: int
    # The pauses taken between tries, in seconds.
    waited: list[float] = dataclasses.field(default_factory=list)


def send(
    client,
    body: NotificationRequest,
    idempotency_key: str | None = None,
    tries: int = 5,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Sent:
    """Enqueues `body` under `idempotency_key` (a new UUID if none), trying up to `tries` times."""
    key = idempotency_key or str(uuid.uuid4())
    waited: list[float] = []
    for attempt in range(1, tries + 1):
        try:
            response = enqueue_notification.sync_detailed(
                client=client, body=body, idempotency_key=key
            )
            status, headers = response.status_code, response.headers
        except errors.UnexpectedStatus as unexpected:
            # An answer the document does not list (a proxy's 502, say): retried if it may pass.
            if unexpected.status_code not in RETRYABLE or attempt == tries:
                raise
            status, headers, response = unexpected.status_code, {}, None
        except httpx.TransportError:
            # No answer: the first try may have been stored, which the same key makes harmless.
            if attempt == tries:
                raise
            status, headers, response = None, {}, None
        if response is not None and (status not in RETRYABLE or attempt == tries):
            return Sent(key, response, attempt, waited)
        pause = _retry_after(headers)
        if pause is None:
            pause = _backoff(attempt, base_delay, max_delay)
        waited.append(pause)
        sleep(pause)
    raise AssertionError("unreachable: the last try returns or raises")


def _retry_after(headers) -> float | None:
    """`Retry-After` in seconds, written as seconds or as an HTTP date; None without one."""
    value = {k.lower(): v for k, v in dict(headers).items()}.get("retry-after")
    if value is None:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _backoff(attempt: int, base: float, cap: float) -> float:
    """Full jitter: a random pause up to `base * 2^(attempt-1)`, at most `cap`."""
    return random.uniform(0, min(cap, base * 2 ** (attempt - 1)))
