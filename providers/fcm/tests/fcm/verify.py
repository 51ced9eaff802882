"""Checks an assertion herald signed with Google's own library (google-auth).

stdin: {"assertion": JWT, "public_key": PEM, "key_id": kid, "audience": token URI}
stdout: {"header": {...}, "claims": {...}} as google-auth read them, once it verified the
RS256 signature against the public key named by the header's `kid`, the audience, and `iat`
and `exp` against its clock. Any failure is an exception: a non-zero exit.
"""

import json
import sys

from google.auth import jwt

given = json.load(sys.stdin)
token = given["assertion"]
# certs as a mapping: google-auth picks the key by the header's `kid`, so a missing or wrong
# `kid` fails here.
claims = jwt.decode(
    token,
    certs={given["key_id"]: given["public_key"]},
    audience=given["audience"],
)
json.dump({"header": jwt.decode_header(token), "claims": claims}, sys.stdout)
