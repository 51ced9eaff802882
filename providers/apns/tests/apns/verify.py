"""Verifies an APNs provider token with PyJWT, as APNs would with the key's public half.

Reads {"token", "public_pem", "team_id"} as JSON on stdin; prints {"header", "claims"} for a
token that verifies (ES256 only, issued by team_id, with iss and iat), or {"error": <the
exception's name>} for one that does not.
"""

import json
import sys

import jwt

data = json.load(sys.stdin)
try:
    claims = jwt.decode(
        data["token"],
        data["public_pem"],
        algorithms=["ES256"],
        issuer=data["team_id"],
        options={"require": ["iss", "iat"]},
    )
except jwt.PyJWTError as err:
    print(json.dumps({"error": type(err).__name__}))
else:
    print(json.dumps({"header": jwt.get_unverified_header(data["token"]), "claims": claims}))
