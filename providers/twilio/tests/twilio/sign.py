"""Signs Twilio status callbacks with Twilio's own helper library (PyPI `twilio`).

Reads JSON on stdin: a list of {"token": str, "url": str, "params": [[name, value], ...]}.
Prints JSON: for each, the X-Twilio-Signature that
`twilio.request_validator.RequestValidator(token).compute_signature(url, params)` computes.
Nothing of herald's code is involved: the signatures are the SDK's.
"""
import json
import sys

from twilio.request_validator import RequestValidator

requests = json.load(sys.stdin)
print(
    json.dumps(
        [
            RequestValidator(r["token"]).compute_signature(r["url"], dict(r["params"]))
            for r in requests
        ]
    )
)
