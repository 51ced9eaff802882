from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.certainty import Certainty
from ..models.channel import Channel
from ..models.delivery import Delivery
from ..models.reason import Reason
from ..models.state import State
from ..types import UNSET, Unset
from typing import cast
from uuid import UUID
import datetime

if TYPE_CHECKING:
  from ..models.attachment import Attachment
  from ..models.attempt import Attempt
  from ..models.content_blocks_type_0_item import ContentBlocksType0Item
  from ..models.content_data_type_0 import ContentDataType0
  from ..models.content_payload_type_0 import ContentPayloadType0
  from ..models.contradiction import Contradiction
  from ..models.email_options_headers import EmailOptionsHeaders
  from ..models.email_options_tags import EmailOptionsTags
  from ..models.notification_metadata import NotificationMetadata
  from ..models.receipt import Receipt
  from ..models.receipt_body import ReceiptBody
  from ..models.review_body import ReviewBody





T = TypeVar("T", bound="ReviewItem")



@_attrs_define
class ReviewItem:
    """ An item in review: the notification with its attempts and evidence, and why it is here.

        Attributes:
            acknowledged (bool): A person closed its review: a `duplicate_possible` delivery they acknowledged, or a
                failed one they closed (`not_delivered` + `close`).
            channel (Channel): The kind of message, and so of recipient.
            created_at (datetime.datetime):
            delivery (Delivery): What herald does after an ambiguous attempt that nothing could settle.
            failovers (int): How many times it moved to its route's fallback; on a fallback it sends under a provider
                key of its own.
            id (UUID):
            metadata (NotificationMetadata):
            route (str):
            state (State): Where a notification stands. Which moves between states there are, and who makes
                each, is herald's transition table (docs/api.md, "Words").
            to (str):
            updated_at (datetime.datetime):
            attempts (list[Attempt]):
            receipt (ReceiptBody): The latest receipt, or `status: none` and nulls before any callback.
            receipts (list[Receipt]): The receipt's history, oldest first: it only moves forward.
            reason (Reason): Why a notification is in review.
            why (str): One sentence for a person: why it waits, with the last attempt's evidence.
            attachments (list[Attachment] | Unset): Email: attachments, in the order given; only vendors that take them get
                any
                (`Capabilities::attachments`).
            bcc (list[str] | Unset): Email: blind copies, in the envelope or the vendor's own field, never in a header.
            cc (list[str] | Unset): Email: copies.
            from_ (None | str | Unset): Email: the sender, `address` or `Name <address>`, in place of the route's own.
            headers (EmailOptionsHeaders | Unset): Email: custom headers, name → value.
            reply_to (None | str | Unset): Email: the reply address, `address` or `Name <address>`.
            tags (EmailOptionsTags | Unset): Email: tags, name → value; only vendors that keep tags get any
                (`Capabilities::tags`).
            blocks (list[ContentBlocksType0Item] | None | Unset): A chat message's layout blocks.
            data (ContentDataType0 | None | Unset):
            html (None | str | Unset):
            locale (None | str | Unset): The template's locale that was rendered (absent: its default).
            locale_fallback (bool | Unset): `true` when the request asked for a `locale` that no translation of the template
                serves,
                so its default language was sent (`[templates] strict_locales = true` refuses instead);
                absent otherwise.
            payload (ContentPayloadType0 | None | Unset):
            subject (None | str | Unset):
            template (None | str | Unset):
            text (None | str | Unset):
            cancellation_key (None | str | Unset): The key it is cancelled by together with others, if it was given one.
            category (None | str | Unset): Its category, if it was given one.
            certainty (Certainty | None | Unset):
            contradiction (Contradiction | None | Unset):
            expires_at (datetime.datetime | None | Unset): No attempt starts after this time (from `expires_at` or
                `ttl_seconds`).
            next_attempt_at (datetime.datetime | None | Unset): When the next try is due, while `queued`.
            send_at (datetime.datetime | None | Unset):
            failure_reason (None | str | Unset): Why it failed, for a `failed` notification: `suppressed` (the recipient is
                on the
                suppression list; nothing was sent), `expired` (its expiry came before an attempt could
                start; nothing was sent), `rejected` (refused for good) or `exhausted` (retries spent on
                causes that may pass). (A review item's own `reason` says why it is
                in review.)
            review (None | ReviewBody | Unset):
            settled_by (None | str | Unset): `person` where its `known` certainty rests on a person's word in review (they
                settled a
                send nothing could prove: delivered, or not delivered and closed or sent again), not on
                what herald proved; absent otherwise. Example: person.
     """

    acknowledged: bool
    channel: Channel
    created_at: datetime.datetime
    delivery: Delivery
    failovers: int
    id: UUID
    metadata: NotificationMetadata
    route: str
    state: State
    to: str
    updated_at: datetime.datetime
    attempts: list[Attempt]
    receipt: ReceiptBody
    receipts: list[Receipt]
    reason: Reason
    why: str
    attachments: list[Attachment] | Unset = UNSET
    bcc: list[str] | Unset = UNSET
    cc: list[str] | Unset = UNSET
    from_: None | str | Unset = UNSET
    headers: EmailOptionsHeaders | Unset = UNSET
    reply_to: None | str | Unset = UNSET
    tags: EmailOptionsTags | Unset = UNSET
    blocks: list[ContentBlocksType0Item] | None | Unset = UNSET
    data: ContentDataType0 | None | Unset = UNSET
    html: None | str | Unset = UNSET
    locale: None | str | Unset = UNSET
    locale_fallback: bool | Unset = UNSET
    payload: ContentPayloadType0 | None | Unset = UNSET
    subject: None | str | Unset = UNSET
    template: None | str | Unset = UNSET
    text: None | str | Unset = UNSET
    cancellation_key: None | str | Unset = UNSET
    category: None | str | Unset = UNSET
    certainty: Certainty | None | Unset = UNSET
    contradiction: Contradiction | None | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET
    next_attempt_at: datetime.datetime | None | Unset = UNSET
    send_at: datetime.datetime | None | Unset = UNSET
    failure_reason: None | str | Unset = UNSET
    review: None | ReviewBody | Unset = UNSET
    settled_by: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.attachment import Attachment # noqa: PLC0415
        from ..models.attempt import Attempt # noqa: PLC0415
        from ..models.content_blocks_type_0_item import ContentBlocksType0Item # noqa: PLC0415
        from ..models.content_data_type_0 import ContentDataType0 # noqa: PLC0415
        from ..models.content_payload_type_0 import ContentPayloadType0 # noqa: PLC0415
        from ..models.contradiction import Contradiction # noqa: PLC0415
        from ..models.email_options_headers import EmailOptionsHeaders # noqa: PLC0415
        from ..models.email_options_tags import EmailOptionsTags # noqa: PLC0415
        from ..models.notification_metadata import NotificationMetadata # noqa: PLC0415
        from ..models.receipt import Receipt # noqa: PLC0415
        from ..models.receipt_body import ReceiptBody # noqa: PLC0415
        from ..models.review_body import ReviewBody # noqa: PLC0415
        acknowledged = self.acknowledged

        channel = self.channel.value

        created_at = self.created_at.isoformat()

        delivery = self.delivery.value

        failovers = self.failovers

        id = str(self.id)

        metadata = self.metadata.to_dict()

        route = self.route

        state = self.state.value

        to = self.to

        updated_at = self.updated_at.isoformat()

        attempts = []
        for attempts_item_data in self.attempts:
            attempts_item = attempts_item_data.to_dict()
            attempts.append(attempts_item)



        receipt = self.receipt.to_dict()

        receipts = []
        for receipts_item_data in self.receipts:
            receipts_item = receipts_item_data.to_dict()
            receipts.append(receipts_item)



        reason = self.reason.value

        why = self.why

        attachments: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.attachments, Unset):
            attachments = []
            for attachments_item_data in self.attachments:
                attachments_item = attachments_item_data.to_dict()
                attachments.append(attachments_item)



        bcc: list[str] | Unset = UNSET
        if not isinstance(self.bcc, Unset):
            bcc = self.bcc



        cc: list[str] | Unset = UNSET
        if not isinstance(self.cc, Unset):
            cc = self.cc



        from_: None | str | Unset
        if isinstance(self.from_, Unset):
            from_ = UNSET
        else:
            from_ = self.from_

        headers: dict[str, Any] | Unset = UNSET
        if not isinstance(self.headers, Unset):
            headers = self.headers.to_dict()

        reply_to: None | str | Unset
        if isinstance(self.reply_to, Unset):
            reply_to = UNSET
        else:
            reply_to = self.reply_to

        tags: dict[str, Any] | Unset = UNSET
        if not isinstance(self.tags, Unset):
            tags = self.tags.to_dict()

        blocks: list[dict[str, Any]] | None | Unset
        if isinstance(self.blocks, Unset):
            blocks = UNSET
        elif isinstance(self.blocks, list):
            blocks = []
            for blocks_type_0_item_data in self.blocks:
                blocks_type_0_item = blocks_type_0_item_data.to_dict()
                blocks.append(blocks_type_0_item)


        else:
            blocks = self.blocks

        data: dict[str, Any] | None | Unset
        if isinstance(self.data, Unset):
            data = UNSET
        elif isinstance(self.data, ContentDataType0):
            data = self.data.to_dict()
        else:
            data = self.data

        html: None | str | Unset
        if isinstance(self.html, Unset):
            html = UNSET
        else:
            html = self.html

        locale: None | str | Unset
        if isinstance(self.locale, Unset):
            locale = UNSET
        else:
            locale = self.locale

        locale_fallback = self.locale_fallback

        payload: dict[str, Any] | None | Unset
        if isinstance(self.payload, Unset):
            payload = UNSET
        elif isinstance(self.payload, ContentPayloadType0):
            payload = self.payload.to_dict()
        else:
            payload = self.payload

        subject: None | str | Unset
        if isinstance(self.subject, Unset):
            subject = UNSET
        else:
            subject = self.subject

        template: None | str | Unset
        if isinstance(self.template, Unset):
            template = UNSET
        else:
            template = self.template

        text: None | str | Unset
        if isinstance(self.text, Unset):
            text = UNSET
        else:
            text = self.text

        cancellation_key: None | str | Unset
        if isinstance(self.cancellation_key, Unset):
            cancellation_key = UNSET
        else:
            cancellation_key = self.cancellation_key

        category: None | str | Unset
        if isinstance(self.category, Unset):
            category = UNSET
        else:
            category = self.category

        certainty: None | str | Unset
        if isinstance(self.certainty, Unset):
            certainty = UNSET
        elif isinstance(self.certainty, Certainty):
            certainty = self.certainty.value
        else:
            certainty = self.certainty

        contradiction: dict[str, Any] | None | Unset
        if isinstance(self.contradiction, Unset):
            contradiction = UNSET
        elif isinstance(self.contradiction, Contradiction):
            contradiction = self.contradiction.to_dict()
        else:
            contradiction = self.contradiction

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        next_attempt_at: None | str | Unset
        if isinstance(self.next_attempt_at, Unset):
            next_attempt_at = UNSET
        elif isinstance(self.next_attempt_at, datetime.datetime):
            next_attempt_at = self.next_attempt_at.isoformat()
        else:
            next_attempt_at = self.next_attempt_at

        send_at: None | str | Unset
        if isinstance(self.send_at, Unset):
            send_at = UNSET
        elif isinstance(self.send_at, datetime.datetime):
            send_at = self.send_at.isoformat()
        else:
            send_at = self.send_at

        failure_reason: None | str | Unset
        if isinstance(self.failure_reason, Unset):
            failure_reason = UNSET
        else:
            failure_reason = self.failure_reason

        review: dict[str, Any] | None | Unset
        if isinstance(self.review, Unset):
            review = UNSET
        elif isinstance(self.review, ReviewBody):
            review = self.review.to_dict()
        else:
            review = self.review

        settled_by: None | str | Unset
        if isinstance(self.settled_by, Unset):
            settled_by = UNSET
        else:
            settled_by = self.settled_by


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "acknowledged": acknowledged,
            "channel": channel,
            "created_at": created_at,
            "delivery": delivery,
            "failovers": failovers,
            "id": id,
            "metadata": metadata,
            "route": route,
            "state": state,
            "to": to,
            "updated_at": updated_at,
            "attempts": attempts,
            "receipt": receipt,
            "receipts": receipts,
            "reason": reason,
            "why": why,
        })
        if attachments is not UNSET:
            field_dict["attachments"] = attachments
        if bcc is not UNSET:
            field_dict["bcc"] = bcc
        if cc is not UNSET:
            field_dict["cc"] = cc
        if from_ is not UNSET:
            field_dict["from"] = from_
        if headers is not UNSET:
            field_dict["headers"] = headers
        if reply_to is not UNSET:
            field_dict["reply_to"] = reply_to
        if tags is not UNSET:
            field_dict["tags"] = tags
        if blocks is not UNSET:
            field_dict["blocks"] = blocks
        if data is not UNSET:
            field_dict["data"] = data
        if html is not UNSET:
            field_dict["html"] = html
        if locale is not UNSET:
            field_dict["locale"] = locale
        if locale_fallback is not UNSET:
            field_dict["locale_fallback"] = locale_fallback
        if payload is not UNSET:
            field_dict["payload"] = payload
        if subject is not UNSET:
            field_dict["subject"] = subject
        if template is not UNSET:
            field_dict["template"] = template
        if text is not UNSET:
            field_dict["text"] = text
        if cancellation_key is not UNSET:
            field_dict["cancellation_key"] = cancellation_key
        if category is not UNSET:
            field_dict["category"] = category
        if certainty is not UNSET:
            field_dict["certainty"] = certainty
        if contradiction is not UNSET:
            field_dict["contradiction"] = contradiction
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if next_attempt_at is not UNSET:
            field_dict["next_attempt_at"] = next_attempt_at
        if send_at is not UNSET:
            field_dict["send_at"] = send_at
        if failure_reason is not UNSET:
            field_dict["failure_reason"] = failure_reason
        if review is not UNSET:
            field_dict["review"] = review
        if settled_by is not UNSET:
            field_dict["settled_by"] = settled_by

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.attachment import Attachment # noqa: PLC0415
        from ..models.attempt import Attempt # noqa: PLC0415
        from ..models.content_blocks_type_0_item import ContentBlocksType0Item # noqa: PLC0415
        from ..models.content_data_type_0 import ContentDataType0 # noqa: PLC0415
        from ..models.content_payload_type_0 import ContentPayloadType0 # noqa: PLC0415
        from ..models.contradiction import Contradiction # noqa: PLC0415
        from ..models.email_options_headers import EmailOptionsHeaders # noqa: PLC0415
        from ..models.email_options_tags import EmailOptionsTags # noqa: PLC0415
        from ..models.notification_metadata import NotificationMetadata # noqa: PLC0415
        from ..models.receipt import Receipt # noqa: PLC0415
        from ..models.receipt_body import ReceiptBody # noqa: PLC0415
        from ..models.review_body import ReviewBody # noqa: PLC0415
        d = dict(src_dict)
        acknowledged = d.pop("acknowledged")

        channel = Channel(d.pop("channel"))




        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))




        delivery = Delivery(d.pop("delivery"))




        failovers = d.pop("failovers")

        id = UUID(d.pop("id"))




        metadata = NotificationMetadata.from_dict(d.pop("metadata"))




        route = d.pop("route")

        state = State(d.pop("state"))




        to = d.pop("to")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))




        attempts = []
        _attempts = d.pop("attempts")
        for attempts_item_data in (_attempts):
            attempts_item = Attempt.from_dict(attempts_item_data)



            attempts.append(attempts_item)


        receipt = ReceiptBody.from_dict(d.pop("receipt"))




        receipts = []
        _receipts = d.pop("receipts")
        for receipts_item_data in (_receipts):
            receipts_item = Receipt.from_dict(receipts_item_data)



            receipts.append(receipts_item)


        reason = Reason(d.pop("reason"))




        why = d.pop("why")

        _attachments = d.pop("attachments", UNSET)
        attachments: list[Attachment] | Unset = UNSET
        if _attachments is not UNSET:
            attachments = []
            for attachments_item_data in _attachments:
                attachments_item = Attachment.from_dict(attachments_item_data)



                attachments.append(attachments_item)


        bcc = cast(list[str], d.pop("bcc", UNSET))


        cc = cast(list[str], d.pop("cc", UNSET))


        def _parse_from_(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        from_ = _parse_from_(d.pop("from", UNSET))


        _headers = d.pop("headers", UNSET)
        headers: EmailOptionsHeaders | Unset
        if isinstance(_headers,  Unset):
            headers = UNSET
        else:
            headers = EmailOptionsHeaders.from_dict(_headers)




        def _parse_reply_to(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reply_to = _parse_reply_to(d.pop("reply_to", UNSET))


        _tags = d.pop("tags", UNSET)
        tags: EmailOptionsTags | Unset
        if isinstance(_tags,  Unset):
            tags = UNSET
        else:
            tags = EmailOptionsTags.from_dict(_tags)




        def _parse_blocks(data: object) -> list[ContentBlocksType0Item] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                blocks_type_0 = []
                _blocks_type_0 = data
                for blocks_type_0_item_data in (_blocks_type_0):
                    blocks_type_0_item = ContentBlocksType0Item.from_dict(blocks_type_0_item_data)



                    blocks_type_0.append(blocks_type_0_item)

                return blocks_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[ContentBlocksType0Item] | None | Unset, data)

        blocks = _parse_blocks(d.pop("blocks", UNSET))


        def _parse_data(data: object) -> ContentDataType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                data_type_0 = ContentDataType0.from_dict(data)



                return data_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ContentDataType0 | None | Unset, data)

        data = _parse_data(d.pop("data", UNSET))


        def _parse_html(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        html = _parse_html(d.pop("html", UNSET))


        def _parse_locale(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        locale = _parse_locale(d.pop("locale", UNSET))


        locale_fallback = d.pop("locale_fallback", UNSET)

        def _parse_payload(data: object) -> ContentPayloadType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                payload_type_0 = ContentPayloadType0.from_dict(data)



                return payload_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ContentPayloadType0 | None | Unset, data)

        payload = _parse_payload(d.pop("payload", UNSET))


        def _parse_subject(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        subject = _parse_subject(d.pop("subject", UNSET))


        def _parse_template(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        template = _parse_template(d.pop("template", UNSET))


        def _parse_text(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        text = _parse_text(d.pop("text", UNSET))


        def _parse_cancellation_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cancellation_key = _parse_cancellation_key(d.pop("cancellation_key", UNSET))


        def _parse_category(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        category = _parse_category(d.pop("category", UNSET))


        def _parse_certainty(data: object) -> Certainty | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                certainty_type_1 = Certainty(data)



                return certainty_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Certainty | None | Unset, data)

        certainty = _parse_certainty(d.pop("certainty", UNSET))


        def _parse_contradiction(data: object) -> Contradiction | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                contradiction_type_1 = Contradiction.from_dict(data)



                return contradiction_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Contradiction | None | Unset, data)

        contradiction = _parse_contradiction(d.pop("contradiction", UNSET))


        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)



                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))


        def _parse_next_attempt_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_attempt_at_type_0 = datetime.datetime.fromisoformat(data)



                return next_attempt_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        next_attempt_at = _parse_next_attempt_at(d.pop("next_attempt_at", UNSET))


        def _parse_send_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                send_at_type_0 = datetime.datetime.fromisoformat(data)



                return send_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        send_at = _parse_send_at(d.pop("send_at", UNSET))


        def _parse_failure_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        failure_reason = _parse_failure_reason(d.pop("failure_reason", UNSET))


        def _parse_review(data: object) -> None | ReviewBody | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                review_type_1 = ReviewBody.from_dict(data)



                return review_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ReviewBody | Unset, data)

        review = _parse_review(d.pop("review", UNSET))


        def _parse_settled_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        settled_by = _parse_settled_by(d.pop("settled_by", UNSET))


        review_item = cls(
            acknowledged=acknowledged,
            channel=channel,
            created_at=created_at,
            delivery=delivery,
            failovers=failovers,
            id=id,
            metadata=metadata,
            route=route,
            state=state,
            to=to,
            updated_at=updated_at,
            attempts=attempts,
            receipt=receipt,
            receipts=receipts,
            reason=reason,
            why=why,
            attachments=attachments,
            bcc=bcc,
            cc=cc,
            from_=from_,
            headers=headers,
            reply_to=reply_to,
            tags=tags,
            blocks=blocks,
            data=data,
            html=html,
            locale=locale,
            locale_fallback=locale_fallback,
            payload=payload,
            subject=subject,
            template=template,
            text=text,
            cancellation_key=cancellation_key,
            category=category,
            certainty=certainty,
            contradiction=contradiction,
            expires_at=expires_at,
            next_attempt_at=next_attempt_at,
            send_at=send_at,
            failure_reason=failure_reason,
            review=review,
            settled_by=settled_by,
        )


        review_item.additional_properties = d
        return review_item

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
