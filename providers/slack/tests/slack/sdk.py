"""Slack's own Python SDK against the fake Slack: what a client nobody here wrote sends and reads.

Reads a JSON object on stdin: `base_url` (the fake's), `token` (its bot token), `channel`,
`key` (the herald key to stamp). Posts one message with blocks and metadata through
`WebClient.chat_postMessage`, reads the whole history back with `include_all_metadata`, one
message per page through the SDK's own cursor pagination, then once without it, and makes two
calls Slack refuses. Prints what it saw as one JSON object on stdout.
"""

import json
import sys

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.models.metadata import Metadata


def refused(call):
    """The `error` of a call Slack refused (the SDK raises SlackApiError on `ok: false`)."""
    try:
        call()
    except SlackApiError as err:
        return err.response["error"]
    return None


def main():
    args = json.load(sys.stdin)
    base_url = args["base_url"] + "/"
    client = WebClient(base_url=base_url, token=args["token"])
    channel = args["channel"]

    posted = client.chat_postMessage(
        channel=channel,
        text="Posted by Slack's SDK",
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "*From the SDK*"}}],
        metadata=Metadata(
            event_type="herald_notification",
            event_payload={"herald_key": args["key"]},
        ),
    )

    pages = 0
    listed = []
    for page in client.conversations_history(channel=channel, include_all_metadata=True, limit=1):
        pages += 1
        listed.extend(page["messages"])

    stripped = client.conversations_history(channel=channel)["messages"]

    wrong_token = refused(
        lambda: WebClient(base_url=base_url, token="xoxb-not-the-token").chat_postMessage(
            channel=channel, text="x"
        )
    )
    unknown_channel = refused(lambda: client.chat_postMessage(channel="C9999999999", text="x"))

    print(
        json.dumps(
            {
                "posted": {"channel": posted["channel"], "ts": posted["ts"]},
                "pages": pages,
                "listed": listed,
                "stripped": stripped,
                "wrong_token": wrong_token,
                "unknown_channel": unknown_channel,
            }
        )
    )


if __name__ == "__main__":
    main()
