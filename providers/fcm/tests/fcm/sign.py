"""Signs the token-exchange assertion as Google's own library (google-auth) does for a service
account key, so that a test can hand it to the fake's token endpoint.

stdin: {"service_account": the key file's JSON text, "scopes": [...]}
stdout: {"assertion": JWT}
"""

import json
import sys

from google.oauth2 import service_account

given = json.load(sys.stdin)
info = json.loads(given["service_account"])
credentials = service_account.Credentials.from_service_account_info(
    info, scopes=given["scopes"]
)
# What `Credentials.refresh` posts to the key's token_uri as `assertion`.
assertion = credentials._make_authorization_grant_assertion()
if isinstance(assertion, bytes):
    assertion = assertion.decode()
json.dump({"assertion": assertion}, sys.stdout)
