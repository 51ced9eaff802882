"""Verifies herald's webhook deliveries with the `standardwebhooks` package from PyPI (an
implementation nobody at herald wrote) and parses each body with the `cloudevents` SDK.

Usage: python3 verify_webhooks.py SECRET REQUESTS_JSON
REQUESTS_JSON holds a list of {"headers": {name: value}, "body": "…"} as the receiver got them.
Prints one JSON line: {"verified": N, "events": [{"id", "type", "source", "subject",
"webhook_id"}, …]}; exits non-zero on the first request that does not verify.
"""

import json
import sys

from cloudevents.core.bindings import http
from standardwebhooks.webhooks import Webhook

secret, path = sys.argv[1], sys.argv[2]
with open(path) as f:
    requests = json.load(f)

webhook = Webhook(secret)
events = []
for request in requests:
    headers, body = request["headers"], request["body"]
    # Raises WebhookVerificationError on a bad signature or a stale timestamp.
    webhook.verify(body, headers)
    event = http.from_http_event(http.HTTPMessage(headers=headers, body=body.encode()))
    events.append(
        {
            "id": event.get_id(),
            "type": event.get_type(),
            "source": event.get_source(),
            "subject": event.get_subject(),
            "webhook_id": headers["webhook-id"],
        }
    )
print(json.dumps({"verified": len(requests), "events": events}))
