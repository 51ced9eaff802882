"""Posts CloudEvents to herald with the `cloudevents` SDK from PyPI (a client nobody at herald
wrote), in structured and in binary HTTP mode, and prints each answer as one JSON line:
{"case": …, "status": …, "headers": {…}, "body": …}. Used by tests/events.rs.

Usage: python3 cloudevents_client.py BASE_URL TOKEN SOURCE
"""

import json
import sys
import urllib.error
import urllib.request

from cloudevents.core.bindings import http
from cloudevents.core.v03.event import CloudEvent as CloudEventV03
from cloudevents.core.v1.event import CloudEvent

base, token, source = sys.argv[1], sys.argv[2], sys.argv[3]


def post(case, message):
    headers = dict(message.headers)
    headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"{base}/v1/events", data=message.body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, answer, body = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        status, answer, body = error.code, dict(error.headers), error.read()
    print(
        json.dumps(
            {
                "case": case,
                "status": status,
                "headers": {k.lower(): v for k, v in answer.items()},
                "body": json.loads(body) if body else None,
            }
        ),
        flush=True,
    )


def event(event_id, event_type="ExportCompleted", data=None, cls=CloudEvent, typed=True):
    attributes = {
        "id": event_id,
        "source": source,
        "type": event_type,
    }
    if typed:
        attributes["datacontenttype"] = "application/json"

    if cls is CloudEventV03:
        attributes["specversion"] = "0.3"
    return cls(
        attributes=attributes,
        data=data
        if data is not None
        else {"email": "ada@example.com", "job": "job-42", "url": "https://example.com/x"},
    )


post("structured_new", http.to_structured_event(event("evt-1")))
post("binary_repeat", http.to_binary_event(event("evt-1")))
post("binary_new", http.to_binary_event(event("evt-2")))
post("structured_unmapped", http.to_structured_event(event("evt-3", "SomethingElse")))
post(
    "binary_missing_variable",
    http.to_binary_event(event("evt-4", data={"job": "job-43", "url": "https://x"})),
)
post("structured_v03", http.to_structured_event(event("evt-5", cls=CloudEventV03)))
# No datacontenttype: the SDK sends no Content-Type, and urllib adds its form default.
post("binary_untyped", http.to_binary_event(event("evt-6", typed=False)))
