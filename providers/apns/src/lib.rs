//! Herald's adapter for [Apple Push Notification service](https://developer.apple.com/documentation/usernotifications)
//! (APNs, channel `push`), with token-based authentication.
//!
//! One request per send, over HTTP/2 and TLS only: `POST https://api.push.apple.com/3/device/<device token>`
//! (herald's `to` is the device token, hexadecimal; `https://api.sandbox.push.apple.com` for the
//! development environment, as the route's `base_url`) with
//!
//! - `authorization: bearer <provider token>`: an ES256 JWT, header `{alg: ES256, kid: <key_id>}`,
//!   claims `{iss: <team_id>, iat}`, signed with the route's `.p8` key and kept fresh by
//!   [`token`] (minted lazily, reused for 50 minutes, never sooner than 20 minutes unless APNs
//!   refused it);
//! - `apns-id`: herald's [`ProviderKey`](herald_provider::ProviderKey) as a canonical UUID
//!   ([`apns_id_for`]: a key that is not a UUID, a fallback route's `…-f1`, becomes the UUIDv5
//!   of its text), so that APNs' answer, and any later look at Apple's logs, names the
//!   notification by herald's key;
//! - `apns-topic` (the route's `topic`), `apns-push-type` (`push_type`, default `alert`), and
//!   where set `apns-priority` (`priority`: 10, 5 or 1), `apns-expiration` (the notification's
//!   `expires_at`, in UNIX seconds) and `apns-collapse-id` (`collapse_id = "notification"`:
//!   herald's notification id; see *Duplicates* below);
//! - the body `{"aps": {"alert": {"title": <subject>, "body": <text>}}}`, at most 4096 bytes
//!   (a larger one, or one with neither subject nor text, is refused before any I/O, as is a
//!   message on another channel than `push`, or with tags or attachments).
//!
//! APNs answers 200 with the `apns-id` echoed and an empty body (the `apns-id` becomes the
//! `provider_ref`), or an error status with `{"reason": "…"}` (and on a 410 a `timestamp`), whose
//! `reason` becomes `Evidence::vendor_code`.
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | none: `apns-id` is "a canonical UUID that's the unique ID for the notification", used to report errors; nothing says APNs deduplicates by it, so a resend is a second push | <https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns> |
//! | outcome query | none: `apns-unique-id` is "only available in the Development environment", to query the Delivery Log in the Push Notifications Console (a tool for people, not an API) | <https://developer.apple.com/documentation/usernotifications/handling-notification-responses-from-apns> |
//! | payload limit | 4096 bytes ("limited to a maximum size of 4 KB (4096 bytes)"; VoIP's 5120 is not used: herald's payload is an alert) | <https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns> |
//! | tags, attachments | none: a push has neither; `prepare` refuses both | |
//! | rate limit | none stated per provider; 429 `TooManyRequests` is "too many requests for the same device token" (a per-device limit); 429 `TooManyProviderTokenUpdates` is ours: "Update the authentication token no more than once every 20 minutes". No `Retry-After` documented | <https://developer.apple.com/documentation/usernotifications/handling-notification-responses-from-apns> |
//! | token refresh | "Refresh your token no more than once every 20 minutes and no less than once every 60 minutes … APNs report an error if you use a new token more than once every 20 minutes on the same connection"; an `iat` over an hour old is `403 ExpiredProviderToken` | <https://developer.apple.com/documentation/usernotifications/establishing-a-token-based-connection-to-apns> |
//! | protocol | "Use HTTP/2 and TLS 1.2 or later"; "You can't map a connection to APNs to multiple teams" (each route has its own client and connections) | same two pages |
//! | delivery callbacks | none: APNs reports nothing back to the provider after its answer; what became of a push shows only as "aggregated, rounded reports" in Apple's Push Notifications Console. So herald has no reader, and `POST /v1/callbacks/<route>` answers 404 | <https://developer.apple.com/documentation/usernotifications/viewing-the-status-of-push-notifications-using-metrics-and-apns> |
//!
//! Since APNs has neither a key it deduplicates nor a look-up, an ambiguous send is settled by
//! the route's delivery policy alone (`at_most_once`: not resent; `at_least_once`: resent, with
//! the same `apns-id` and, where the route sets it, the same `apns-collapse-id`).
//!
//! # Classification
//! Sources: the status and `reason` tables of
//! <https://developer.apple.com/documentation/usernotifications/handling-notification-responses-from-apns>
//! (quoted below) and its retry advice: "After 15 minutes, you can retry JSON payloads that
//! receive response status codes that begin with 5XX … Don't retry notification responses with
//! the error code `BadDeviceToken`, `DeviceTokenNotForTopic`, `Forbidden`, `ExpiredToken`,
//! `Unregistered`, or `PayloadTooLarge`. You can retry with a delay, if you get the error code
//! `TooManyRequests`."
//!
//! | APNs' answer | herald's result |
//! |---|---|
//! | 200 (or any other 2xx) with the request's `apns-id` echoed, body empty (or JSON) | `Accepted`, `provider_ref` = the `apns-id`. Apple documents only 200; the echoed `apns-id` is the proof, whatever the 2xx |
//! | 2xx without our `apns-id`, or with a body that is not JSON (a proxy's page) | `Ambiguous`: nothing proves APNs took it |
//! | 400 `BadDeviceToken` ("The specified device token is invalid. Verify that the request contains a valid token and that the token matches the environment.") | `Rejected` permanent. Not a suppression: a route pointed at the wrong environment gets this for good tokens, and herald's suppression holds the device for every route of the tenant |
//! | 400 `DeviceTokenNotForTopic`, `BadTopic`, `MissingTopic`, `BadMessageId`, `BadCollapseId`, `BadPriority`, `BadExpirationDate`, `InvalidPushType`, `PayloadEmpty`, any other 400; 404 `BadPath`; 405 `MethodNotAllowed`; 413 `PayloadTooLarge` | `Rejected` permanent |
//! | 403 `ExpiredProviderToken` ("The provider token is stale and a new token should be generated") or `InvalidProviderToken` | not processed: "APNs validates the request using … the provided authentication token … If validation succeeds, APNs uses the provided device token to identify the user's device. It then tries to send" (<https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns>). So a new token is minted and the request sent **once** more within the route's timeout, whose answer is the result; where APNs refused a token made on its word within the last 20 minutes, no new one: `Rejected` permanent (a 403: herald fails over and counts the route refused). With no time left for the resend: `Rejected` transient |
//! | 403 `MissingProviderToken`, `Forbidden`, `BadEnvironmentKeyIdInToken`, `UnrelatedKeyIdInToken`, any other 403 | `Rejected` permanent (the route itself refused) |
//! | 410 `Unregistered` ("The device token is inactive for the specified topic. There is no need to send further pushes to the same device token") or `ExpiredToken` | `Rejected` permanent, and [`Adapter::unsubscribed`](herald_provider::Adapter::unsubscribed): herald suppresses the device token |
//! | 429 `TooManyRequests` ("Too many requests were made consecutively to the same device token") | `Rejected` transient; `retry_after` from `Retry-After` if one comes (Apple documents none), which holds the route. Without one, no `retry_after`: the limit is this device's, so this notification backs off on herald's retry schedule and the route goes on sending to other devices |
//! | 429 `TooManyProviderTokenUpdates` | `Rejected` transient, `retry_after` from `Retry-After`, else 20 minutes (Apple's interval between tokens): it concerns the route's token, so the route waits rather than spend every notification's attempts |
//! | 408, 425, any other 429 | `Rejected` transient, with `Retry-After` if sent (shared table) |
//! | 500 `InternalServerError` | `Ambiguous`: nothing says it was not delivered |
//! | 503 `ServiceUnavailable`, `Shutdown` ("The server is shutting down and unavailable") | `Ambiguous`: Apple says what the server is, not that this request was left undelivered, and retries 5xx payloads no sooner than 15 minutes; herald's rule reads no 503 as "not processed" without the vendor's word |
//! | 502, 504, any other 5xx | `Ambiguous` (shared table) |
//! | connection or TLS failure before the request was written (a server that cannot speak `h2` fails here) | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the request was written, or the connection closed by a `GOAWAY` before our answer | `Ambiguous` (stage `awaiting_response`) |
//!
//! Where the issue asked for "503 → transient": Apple's docs do not support it, so the table
//! follows herald's rule instead.
//!
//! # Duplicates and `apns-collapse-id`
//! APNs deduplicates nothing, so a resend after an ambiguous answer that APNs had in fact taken
//! reaches the device twice. `collapse_id = "notification"` makes herald send its notification
//! id as `apns-collapse-id` on every attempt, and APNs merges pushes with the same value into
//! one notification on the device: "When sending the same notification more than once, use the
//! same value in this header to merge the requests"
//! (<https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns>).
//! A duplicate then replaces the notification shown rather than showing a second one; it is
//! still a second delivery (the app's extension runs again, and a person who dismissed the first
//! sees it again), so herald still counts the send ambiguous and the delivery policy still
//! decides. Two notifications never merge: each has its own id. The notification id rather than
//! the key, so that a fallback route's send of the notification (its key has a suffix) merges
//! too, where it goes to the same app. herald's `Message` has no field for a collapse id of the
//! caller's choosing; a route that needs one per conversation needs that field first.
//!
//! # Connection
//! HTTP/2 only: over `https` the client offers ALPN `h2` alone and speaks nothing else (a server
//! that cannot is refused in the handshake, before anything is written). A plain `http` base URL
//! is spoken as HTTP/1.1: that is only the conformance kit's scripted server. `root_certificate`
//! adds CAs to trust beside the system's, as an SMTP route does (the fake's test CA).
//!
//! # Secrets, and the device token
//! The `.p8` key and every provider token stay in `secrecy` types and sensitive header values:
//! never in a `Debug`, an error, evidence or a log. Whatever an answer echoes is scrubbed of the
//! key (its PEM and its base64 body) and of every token the send carried, in every form.
//!
//! The device token names the recipient, and it is the request's path: a trace records the
//! vendor call's destination as `herald_provider::http::UrlOwner::Recipient` does, the path
//! shown as `/REDACTED` (`https://api.push.apple.com/REDACTED`), and a transport error's text
//! leaves the URL out.
//!
//! # Example route
//! ```toml
//! [routes.ios]
//! provider = "apns"
//! team_id = "DEF123GHIJ"                       # 10 characters, from Apple's developer account
//! key_id = "ABC123DEFG"                        # the .p8 key's Key ID
//! signing_key = { file = "/run/secrets/AuthKey_ABC123DEFG.p8" }
//! topic = "com.example.app"                    # apns-topic: the app's bundle id
//! # base_url = "https://api.sandbox.push.apple.com"   # development builds
//! # push_type = "alert"                        # default
//! # priority = 10                              # 10, 5 or 1; default: none sent (APNs: 10)
//! collapse_id = "notification"                 # a duplicate replaces the shown notification
//! delivery = "at_most_once"                    # APNs has no dedup and no look-up
//! ```
//!
//! # Modules
//! - [`adapter`]: [`ApnsAdapter`] and its [`ApnsRoute`].
//! - [`token`]: the provider token and when a new one is made.
//! - `fake` (feature `fake`): a local stand-in for APNs over HTTP/2 and TLS with a test CA,
//!   provider-token checks, faults and a ledger.
//!
//! The headers and JSON shapes both sides share live in one private module, `wire`.
#![forbid(unsafe_code)]

pub mod adapter;
#[cfg(feature = "fake")]
pub mod fake;
mod settings;
pub mod token;
mod wire;

pub use adapter::{
    ApnsAdapter, ApnsError, ApnsRoute, CollapseId, DEFAULT_BASE_URL, PushType, SANDBOX_BASE_URL,
    apns_id_for,
};
pub use settings::Settings;
pub use wire::MAX_PAYLOAD_BYTES;
