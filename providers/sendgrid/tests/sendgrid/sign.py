"""Event Webhook signatures as SendGrid makes them, checked by SendGrid's own library.

Reads JSON on stdin: a list of {"timestamp": str, "payload": str}. Makes a fresh P-256 key,
signs each `timestamp + payload` with ECDSA/SHA-256 (DER, base64) as SendGrid signs its Event
Webhook, and checks every signature with `sendgrid.helpers.eventwebhook.EventWebhook`, SendGrid's
verifier, before printing it: a signature the library refuses fails the script. Prints JSON:
{"public_key": base64 DER SubjectPublicKeyInfo (what SendGrid shows), "signatures": [...]}.
"""
import base64
import json
import sys

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sendgrid.helpers.eventwebhook import EventWebhook

requests = json.load(sys.stdin)
private_key = ec.generate_private_key(ec.SECP256R1())
public_key = base64.b64encode(
    private_key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
).decode()
verifier = EventWebhook(public_key)
signatures = []
for request in requests:
    signed = (request["timestamp"] + request["payload"]).encode("utf-8")
    signature = base64.b64encode(private_key.sign(signed, ec.ECDSA(hashes.SHA256()))).decode()
    if not verifier.verify_signature(request["payload"], signature, request["timestamp"]):
        sys.exit("SendGrid's EventWebhook refuses the signature")
    signatures.append(signature)
print(json.dumps({"public_key": public_key, "signatures": signatures}))
