"""An independent Standard Webhooks signature check, in the Python standard library only.

Reads JSON on stdin: {"secrets": ["whsec_..."], "id": str, "timestamp": str,
"signature": str (the webhook-signature header), "body_b64": str (the body as received)}.
Prints JSON: for each secret, the index of the space-separated `v1,` entry it verifies, or -1.
Written from the spec's text (spec/standard-webhooks.md), not from herald's Rust code.
"""
import base64
import hashlib
import hmac
import json
import sys

request = json.load(sys.stdin)
body = base64.b64decode(request["body_b64"])
signed = request["id"].encode() + b"." + request["timestamp"].encode() + b"." + body
entries = request["signature"].split(" ")

matches = []
for secret in request["secrets"]:
    assert secret.startswith("whsec_"), "secrets are whsec_ + base64"
    key = base64.b64decode(secret[len("whsec_"):], validate=True)
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    found = -1
    for index, entry in enumerate(entries):
        version, _, signature = entry.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            found = index
            break
    matches.append(found)
print(json.dumps(matches))
