"""HTTP Basic credentials, built by Python's own `base64`, for the vendors that sign nothing and
post their callbacks with credentials in the URL (Mailjet, SparkPost): Basic is all there is to
check.

Reads JSON on stdin: a list of {"user": str, "password": str}. Prints JSON: for each, the
Authorization header a client sends for https://user:password@....
Nothing of herald's code is involved.
"""
import base64
import json
import sys

credentials = json.load(sys.stdin)
print(
    json.dumps(
        [
            "Basic " + base64.b64encode((c["user"] + ":" + c["password"]).encode()).decode()
            for c in credentials
        ]
    )
)
