"""Telnyx webhook signatures, checked by Telnyx's own library.

Reads JSON on stdin: a list of {"timestamp": str, "payload": str}. Makes a fresh Ed25519 key
(PyNaCl), signs each `{timestamp}|{payload}` as Telnyx signs its webhooks, and checks every
signature with `telnyx.lib.webhook_verification.verify_webhook_signature`, Telnyx's verifier,
before printing it: a signature the library refuses fails the script (timestamps outside its
five minutes are signed without that check). Prints JSON: {"public_key": base64 (what Telnyx's
portal shows), "signatures": [...]}.
"""
import base64
import json
import sys
import time

from nacl.signing import SigningKey
from telnyx.lib.webhook_verification import verify_webhook_signature

requests = json.load(sys.stdin)
key = SigningKey.generate()
public_key = base64.b64encode(bytes(key.verify_key)).decode()
signatures = []
for request in requests:
    signed = f"{request['timestamp']}|{request['payload']}".encode("utf-8")
    signature = base64.b64encode(key.sign(signed).signature).decode()
    if abs(time.time() - int(request["timestamp"])) < 300:
        headers = {"telnyx-signature-ed25519": signature, "telnyx-timestamp": request["timestamp"]}
        verify_webhook_signature(request["payload"], headers, public_key)
    signatures.append(signature)
print(json.dumps({"public_key": public_key, "signatures": signatures}))
