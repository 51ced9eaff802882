"""Fills a SQLite database that herald has migrated with STORED finished notifications, as herald
itself would have left them; the twin of bench/growth-postgres.sql (read its header for what the
rows are). bench/growth.sh runs it:

    python3 bench/growth-sqlite.py FILE STORED SPAN_DAYS KEEP_OUTBOX(true|false)

Python's own sqlite3 module, not the sqlite3 shell: the ids are 16-byte UUIDv7 blobs, and the
shell before SQLite 3.41 has no unhex() to make them. SQLite's column types follow
migrations/sqlite: ids are blobs, times are UTC text with six fractional digits (store::Timestamp),
JSON is compact text, the outbox's `published_to` a JSON array. herald never runs ANALYZE on
SQLite, so neither does this.
"""

import hashlib
import json
import sqlite3
import sys
import time
import uuid

BATCH = 10_000
SUBJECT = "Your export is ready"
TEXT = "Download it within seven days."


def v7(us: int, salt: str) -> bytes:
    """A UUIDv7 of the time `us` (microseconds since the epoch); random bits from `salt`."""
    rand = bytearray(hashlib.md5(salt.encode()).digest()[:10])
    rand[0] = 0x70 | (rand[0] & 0x0F)  # version 7
    rand[2] = 0x80 | (rand[2] & 0x3F)  # RFC 9562 variant
    return (us // 1000).to_bytes(6, "big") + bytes(rand)


def text(blob: bytes) -> str:
    return str(uuid.UUID(bytes=blob))


def stamp(us: int) -> str:
    """store::Timestamp on SQLite: exactly six fractional digits."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(us // 1_000_000)) + ".%06dZ" % (
        us % 1_000_000
    )


def api_time(us: int) -> str:
    """RFC 3339 as the API writes it (fractional digits without trailing zeros)."""
    fraction = ("%06d" % (us % 1_000_000)).rstrip("0")
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(us // 1_000_000))
    return f"{whole}.{fraction}Z" if fraction else f"{whole}Z"


# serde_json's compact form; one encoder for every row (json.dumps with options makes a new one
# per call).
compact = json.JSONEncoder(separators=(",", ":")).encode


def rows(stored: int, span_days: int):
    now = time.time_ns() // 1000
    span = span_days * 86_400_000_000
    step = (span - 60_000_000) / stored
    for i in range(1, stored + 1):
        created = now - span + int((i - 1) * step)
        started, finished = created + 8_000, created + 16_000
        nid = v7(created, f"notification{i}")
        yield i, nid, created, started, finished


def fill(path: str, stored: int, span_days: int, keep_outbox: bool) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("BEGIN")
    batch = {"notifications": [], "attempts": [], "keys": [], "events": []}

    def flush():
        db.executemany(
            """INSERT INTO notifications
                   (id, tenant, channel, recipient, route, delivery, content, metadata, state,
                    certainty, acknowledged, generation, attempt_count, send_at, due_at,
                    created_at, updated_at, finished_at, provider_request, key_epoch,
                    budget_from, budget_since)
               VALUES (?, 'dev', 'email', ?, 'sandbox', 'at_most_once', ?, '{}', 'delivered',
                       'known', 0, 1, 1, NULL, ?, ?, ?, ?, ?, 0, 0, NULL)""",
            batch["notifications"],
        )
        db.executemany(
            """INSERT INTO attempts
                   (notification_id, n, generation, route, provider_idempotency_key, started_at,
                    finished_at, send_deadline, result, permanent, provider_ref, evidence,
                    settled_by)
               VALUES (?, 1, 1, 'sandbox', ?, ?, ?, ?, 'accepted', NULL, ?, ?, NULL)""",
            batch["attempts"],
        )
        db.executemany(
            """INSERT INTO idempotency_keys
                   (tenant, key, request_hash, response_status, response_body, notification_id,
                    created_at)
               VALUES ('dev', ?, ?, 202, ?, ?, ?)""",
            batch["keys"],
        )
        if keep_outbox:
            db.executemany(
                """INSERT INTO outbox
                       (id, tenant, notification_id, type, data, created_at, published_to,
                        published_at)
                   VALUES (?, 'dev', ?, ?, ?, ?, '["log"]', ?)""",
                batch["events"],
            )
            db.executemany(
                "INSERT INTO outbox_published (event_id, sink, published_at) VALUES (?, 'log', ?)",
                [(event[0], event[5]) for event in batch["events"]],
            )
        for rows_of in batch.values():
            rows_of.clear()

    started_at = time.monotonic()
    for i, nid, created, started, finished in rows(stored, span_days):
        id_text = text(nid)
        recipient = f"customer-{i % 200000}@example.com"
        key = str(uuid.UUID(bytes=hashlib.md5(f"key{i}".encode()).digest()))
        message = "sbx_" + text(v7(finished, f"message{i}"))
        request = compact(
            {"reference": id_text, "channel": "email", "to": recipient, "subject": SUBJECT, "text": TEXT}
        )
        batch["notifications"].append(
            (
                nid,
                recipient,
                compact({"subject": SUBJECT, "text": TEXT}),
                stamp(finished),
                stamp(created),
                stamp(finished),
                stamp(finished),
                compact({"body": request}),
            )
        )
        evidence = compact(
            {
                "detail": compact({"id": message, "reference": id_text, "status": "accepted"}),
                "stage": "response",
                "status": 202,
            }
        )
        batch["attempts"].append(
            (nid, id_text, stamp(started), stamp(finished), stamp(finished), message, evidence)
        )
        answer = {
            "acknowledged": False,
            "attempts": [],
            "certainty": None,
            "channel": "email",
            "created_at": api_time(created),
            "delivery": "at_most_once",
            "id": id_text,
            "metadata": {},
            "next_attempt_at": api_time(created),
            "review": None,
            "route": "sandbox",
            "send_at": None,
            "state": "queued",
            "subject": SUBJECT,
            "text": TEXT,
            "to": recipient,
            "updated_at": api_time(created),
        }
        batch["keys"].append(
            (key, hashlib.sha256(key.encode()).digest(), compact(answer), nid, stamp(created))
        )
        for salt, at, kind, state, certainty, published_after in (
            ("accepted", created, "accepted", "queued", None, 200_000),
            ("delivered", finished, "delivered", "delivered", "known", 400_000),
        ):
            data = {"certainty": certainty, "id": id_text, "metadata": {}, "state": state}
            batch["events"].append(
                (
                    v7(at, f"{salt}{i}"),
                    nid,
                    f"dev.herald.notification.{kind}",
                    compact(data),
                    stamp(at),
                    stamp(at + published_after),
                )
            )
        if i % BATCH == 0:
            flush()
            rate = i / (time.monotonic() - started_at)
            print(f"growth: sqlite {i}/{stored} ({rate:.0f}/s)", file=sys.stderr, flush=True)
    flush()
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[4] not in ("true", "false"):
        sys.exit(__doc__)
    fill(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "true")
