"""Signs Resend webhooks with Svix's own library (PyPI `svix`), which delivers them for Resend.

Reads JSON on stdin: a list of {"secret": "whsec_...", "id": str, "timestamp": int (unix
seconds), "payload": str}. Prints JSON: for each, the svix-signature that
`svix.webhooks.Webhook(secret).sign(id, timestamp, payload)` computes.
Nothing of herald's code is involved: the signatures are the SDK's.
"""
import json
import sys
from datetime import datetime, timezone

from svix.webhooks import Webhook

webhooks = json.load(sys.stdin)
print(
    json.dumps(
        [
            Webhook(w["secret"]).sign(
                w["id"], datetime.fromtimestamp(w["timestamp"], tz=timezone.utc), w["payload"]
            )
            for w in webhooks
        ]
    )
)
