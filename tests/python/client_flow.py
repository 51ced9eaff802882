"""Runs the README's flow through herald's Python client: what openapi-python-client (a
generator nobody at herald wrote) made of herald's /openapi.json, committed in clients/python,
and the hand-written send that retries with the same key (clients/python_retry). Checks that
every answer parses into the documented type. Prints one JSON line of what it saw, for
tests/clients.rs to check against the database. Exits non-zero, naming the step, on the first
answer that breaks the document.

Usage: python3 client_flow.py CLIENT_DIR RETRY_DIR BASE_URL TOKEN LIMITED_TOKEN
(LIMITED_TOKEN: a token held to one notification a second, burst 1.)
"""

import datetime
import json
import sys
import time

client_dir, retry_dir, base, token, limited_token = sys.argv[1:6]
sys.path.insert(0, client_dir)
sys.path.insert(0, retry_dir)

from herald_client import AuthenticatedClient  # noqa: E402
from herald_client.api.notifications import (  # noqa: E402
    cancel_notification,
    enqueue_notification,
    list_notifications,
    show_notification,
)
from herald_retry import send  # noqa: E402
from herald_client.models import (  # noqa: E402
    Certainty,
    Channel,
    NotificationBody,
    NotificationRequest,
    NotificationRequestMetadataType0,
    Problem,
    State,
)

# Every status the document lists parses into its type; anything else raises.
client = AuthenticatedClient(base_url=base, token=token, raise_on_unexpected_status=True)


def check(condition, step, seen):
    if not condition:
        sys.exit(f"{step}: {seen!r}")


def header(response, name):
    return {k.lower(): v for k, v in response.headers.items()}.get(name.lower())


def readme_request(**extra):
    return NotificationRequest(
        channel=Channel.EMAIL,
        to="ada@example.com",
        subject="Your export is ready",
        text="Download it at https://example.com/x",
        metadata=NotificationRequestMetadataType0.from_dict({"export": "export-42"}),
        **extra,
    )


# Enqueue with an idempotency key, through the send that would retry with it.
sent = send(client, readme_request(), idempotency_key="export-42")
first = sent.response
check((sent.key, sent.tries) == ("export-42", 1), "one try", (sent.key, sent.tries))
check(first.status_code == 202, "enqueue status", first.status_code)
check(isinstance(first.parsed, NotificationBody), "enqueue body", first.parsed)
notification_id = first.parsed.id
check(
    header(first, "Location") == f"/v1/notifications/{notification_id}",
    "enqueue Location",
    dict(first.headers),
)
check(header(first, "Idempotent-Replayed") is None, "a new key is no replay", dict(first.headers))

# Read it back until the built-in sandbox route has delivered it.
deadline = time.monotonic() + 30
while True:
    shown = show_notification.sync(client=client, id=notification_id)
    check(isinstance(shown, NotificationBody), "show body", shown)
    if shown.state == State.DELIVERED:
        break
    check(time.monotonic() < deadline, "delivered within 30 s", shown.to_dict())
    time.sleep(0.05)
check(shown.certainty == Certainty.KNOWN, "delivered certainty", shown.to_dict())
attempt = shown.attempts[0]
# The sandbox answers JSON: the generated client hands it over as JSON, not a string of it.
detail = attempt.evidence.detail
check(isinstance(detail, dict), "evidence.detail is the vendor's JSON", detail)
check(detail.get("id") == attempt.provider_ref, "evidence.detail is this send's answer", detail)

# List: newest first, with the delivered one in it.
page = list_notifications.sync(client=client, state=State.DELIVERED, limit=10)
check([n.id for n in page.data] == [notification_id], "list of delivered", page.to_dict())
check(page.data[0].to_dict() == shown.to_dict(), "a listed item = show", page.to_dict())

# The same key and body again: the first answer, marked as a replay.
replay = send(client, readme_request(), idempotency_key="export-42").response
check(replay.status_code == 202, "replay status", replay.status_code)
check(header(replay, "Idempotent-Replayed") == "true", "replay header", dict(replay.headers))
check(replay.parsed.to_dict() == first.parsed.to_dict(), "replay body", replay.parsed.to_dict())

# Cancel answers what show answers.
later = enqueue_notification.sync(
    client=client,
    body=readme_request(send_at=datetime.datetime(2999, 1, 1, tzinfo=datetime.timezone.utc)),
    idempotency_key="export-43",
)
cancelled = cancel_notification.sync(client=client, id=later.id)
check(isinstance(cancelled, NotificationBody), "cancel body", cancelled)
check(
    (cancelled.state, cancelled.certainty) == (State.CANCELLED, Certainty.KNOWN),
    "cancel state",
    cancelled.to_dict(),
)
shown_cancelled = show_notification.sync(client=client, id=later.id)
check(cancelled.to_dict() == shown_cancelled.to_dict(), "cancel = show", cancelled.to_dict())
again = cancel_notification.sync_detailed(client=client, id=later.id)
check(
    again.status_code == 409 and isinstance(again.parsed, Problem),
    "cancel again",
    (again.status_code, again.content),
)

# A token over its rate: the send waits out Retry-After and tries again with the same key.
limited = AuthenticatedClient(base_url=base, token=limited_token, raise_on_unexpected_status=True)
calm = send(limited, readme_request(), idempotency_key="limited-1")
check(calm.response.status_code == 202, "a first send within the burst", calm.response.status_code)
hurried = send(limited, readme_request(), idempotency_key="limited-2")
check(hurried.response.status_code == 202, "the retried send", hurried.response.status_code)
check(
    hurried.tries == 2 and hurried.waited in ([1.0], [2.0]),
    "one 429, waited out as Retry-After said",
    (hurried.tries, hurried.waited),
)
# The retry carried the key the first try had: the same key now names that notification.
same_key = send(limited, readme_request(), idempotency_key="limited-2").response
check(header(same_key, "Idempotent-Replayed") == "true", "a replay", dict(same_key.headers))
check(same_key.parsed.id == hurried.response.parsed.id, "the retried one", same_key.parsed.id)

print(
    json.dumps(
        {
            "id": str(notification_id),
            "replayed_id": str(replay.parsed.id),
            "delivered_provider_ref": attempt.provider_ref,
            "cancelled_id": str(later.id),
            "cancel_again_type": again.parsed.type_,
            "limited_ids": [str(calm.response.parsed.id), str(hurried.response.parsed.id)],
            "limited_tries": hurried.tries,
        }
    ),
    flush=True,
)
