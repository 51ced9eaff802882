from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.channel import Channel
from ..models.delivery import Delivery
from ..types import UNSET, Unset
from typing import cast
import datetime

if TYPE_CHECKING:
  from ..models.batch_request_items_item_blocks_type_0_item import BatchRequestItemsItemBlocksType0Item
  from ..models.batch_request_items_item_data_type_0 import BatchRequestItemsItemDataType0
  from ..models.batch_request_items_item_headers_type_0 import BatchRequestItemsItemHeadersType0
  from ..models.batch_request_items_item_metadata_type_0 import BatchRequestItemsItemMetadataType0
  from ..models.batch_request_items_item_payload_type_0 import BatchRequestItemsItemPayloadType0
  from ..models.batch_request_items_item_tags_type_0 import BatchRequestItemsItemTagsType0
  from ..models.new_attachment import NewAttachment





T = TypeVar("T", bound="BatchRequestItemsItem")



@_attrs_define
class BatchRequestItemsItem:
    """ A notification to enqueue, as the client sends it. Every field is checked before anything
    is stored; unknown fields are refused, so that a typo never silently drops content.

        Attributes:
            channel (Channel): The kind of message, and so of recipient.
            idempotency_key (str):
            to (str): An email address, an E.164 number, a device token, a webhook URL or a chat channel's id
                (Slack's `C0123456789`), by channel. Example: ada@example.com.
            attachments (list[NewAttachment] | None | Unset): Email: up to 10 files, together at most the configured
                `[attachments] max_total_bytes`
                (10 MiB unless configured); only on routes whose vendor takes attachments. herald
                stores each content once, however many notifications carry it.
            bcc (list[str] | None | Unset): Email: blind copies (in the envelope, never in a header).
            blocks (list[BatchRequestItemsItemBlocksType0Item] | None | Unset): Chat: up to 50 layout blocks (Slack's Block
                Kit), each a JSON object, shown in place of
                `text`, which stays required as the plain form (what a phone's notification shows).
            cancellation_key (None | str | Unset): A key several notifications share (one per user flow, say): `POST
                /v1/notifications/cancel` cancels every one still queued under it. 1 to 255 printable
                ASCII characters. Example: signup-flow/user-42.
            category (None | str | Unset): A configured category (`transactional`, `digest`, …). Email in a category
                recipients may
                leave carries a one-click unsubscribe link, and is not sent to who left it. Example: digest.
            cc (list[str] | None | Unset): Email: copies; `to`, `cc` and `bcc` together at most 50.
            data (BatchRequestItemsItemDataType0 | None | Unset):
            delivery (Delivery | Unset): What herald does after an ambiguous attempt that nothing could settle.
            expires_at (datetime.datetime | None | Unset): No attempt starts after this time (RFC 3339): one still queued or
                waiting for a retry
                then ends `failed` with `failure_reason: "expired"`, without a vendor call. Later than
                now and than `send_at`; not with `ttl_seconds`.
            from_ (None | str | Unset): Email: the sender, `address` or `Name <address>`, in place of the route's own; only
                addresses and @domains the route's `allowed_from` lists. Example: Acme Billing <billing@acme.example>.
            headers (BatchRequestItemsItemHeadersType0 | None | Unset): Email: up to 20 custom headers, name → value; no
                line breaks, and not the headers herald
                writes itself (From, To, Cc, Bcc, Reply-To, Subject, Date, Message-ID, Content-*, …).
            html (None | str | Unset):
            locale (None | str | Unset): The template's language: its locale for this tag, else for each shorter one (`fr-
                CA`,
                then `fr`), else its default. Only with a template. Example: fr-CA.
            metadata (BatchRequestItemsItemMetadataType0 | None | Unset): Up to 50 string pairs, echoed in events.
            payload (BatchRequestItemsItemPayloadType0 | None | Unset): The JSON object a webhook receives.
            reply_to (None | str | Unset): Email: `address` or `Name <address>`.
            route (None | str | Unset): A configured route; defaults to the channel's default route.
            send_at (datetime.datetime | None | Unset): Not before this time (RFC 3339).
            subject (None | str | Unset):
            tags (BatchRequestItemsItemTagsType0 | None | Unset): Email: up to 20 tags, name → value, each of ASCII letters,
                digits, `_` and `-`; only on
                routes whose vendor keeps tags.
            template (None | str | Unset): A configured template, rendered with `data`, instead of literal content.
            text (None | str | Unset):
            ttl_seconds (int | None | Unset): `expires_at` as seconds from now (1 to 31,536,000).
     """

    channel: Channel
    idempotency_key: str
    to: str
    attachments: list[NewAttachment] | None | Unset = UNSET
    bcc: list[str] | None | Unset = UNSET
    blocks: list[BatchRequestItemsItemBlocksType0Item] | None | Unset = UNSET
    cancellation_key: None | str | Unset = UNSET
    category: None | str | Unset = UNSET
    cc: list[str] | None | Unset = UNSET
    data: BatchRequestItemsItemDataType0 | None | Unset = UNSET
    delivery: Delivery | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET
    from_: None | str | Unset = UNSET
    headers: BatchRequestItemsItemHeadersType0 | None | Unset = UNSET
    html: None | str | Unset = UNSET
    locale: None | str | Unset = UNSET
    metadata: BatchRequestItemsItemMetadataType0 | None | Unset = UNSET
    payload: BatchRequestItemsItemPayloadType0 | None | Unset = UNSET
    reply_to: None | str | Unset = UNSET
    route: None | str | Unset = UNSET
    send_at: datetime.datetime | None | Unset = UNSET
    subject: None | str | Unset = UNSET
    tags: BatchRequestItemsItemTagsType0 | None | Unset = UNSET
    template: None | str | Unset = UNSET
    text: None | str | Unset = UNSET
    ttl_seconds: int | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        from ..models.batch_request_items_item_blocks_type_0_item import BatchRequestItemsItemBlocksType0Item # noqa: PLC0415
        from ..models.batch_request_items_item_data_type_0 import BatchRequestItemsItemDataType0 # noqa: PLC0415
        from ..models.batch_request_items_item_headers_type_0 import BatchRequestItemsItemHeadersType0 # noqa: PLC0415
        from ..models.batch_request_items_item_metadata_type_0 import BatchRequestItemsItemMetadataType0 # noqa: PLC0415
        from ..models.batch_request_items_item_payload_type_0 import BatchRequestItemsItemPayloadType0 # noqa: PLC0415
        from ..models.batch_request_items_item_tags_type_0 import BatchRequestItemsItemTagsType0 # noqa: PLC0415
        from ..models.new_attachment import NewAttachment # noqa: PLC0415
        channel = self.channel.value

        idempotency_key = self.idempotency_key

        to = self.to

        attachments: list[dict[str, Any]] | None | Unset
        if isinstance(self.attachments, Unset):
            attachments = UNSET
        elif isinstance(self.attachments, list):
            attachments = []
            for attachments_type_0_item_data in self.attachments:
                attachments_type_0_item = attachments_type_0_item_data.to_dict()
                attachments.append(attachments_type_0_item)


        else:
            attachments = self.attachments

        bcc: list[str] | None | Unset
        if isinstance(self.bcc, Unset):
            bcc = UNSET
        elif isinstance(self.bcc, list):
            bcc = self.bcc


        else:
            bcc = self.bcc

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

        cc: list[str] | None | Unset
        if isinstance(self.cc, Unset):
            cc = UNSET
        elif isinstance(self.cc, list):
            cc = self.cc


        else:
            cc = self.cc

        data: dict[str, Any] | None | Unset
        if isinstance(self.data, Unset):
            data = UNSET
        elif isinstance(self.data, BatchRequestItemsItemDataType0):
            data = self.data.to_dict()
        else:
            data = self.data

        delivery: str | Unset = UNSET
        if not isinstance(self.delivery, Unset):
            delivery = self.delivery.value


        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        from_: None | str | Unset
        if isinstance(self.from_, Unset):
            from_ = UNSET
        else:
            from_ = self.from_

        headers: dict[str, Any] | None | Unset
        if isinstance(self.headers, Unset):
            headers = UNSET
        elif isinstance(self.headers, BatchRequestItemsItemHeadersType0):
            headers = self.headers.to_dict()
        else:
            headers = self.headers

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

        metadata: dict[str, Any] | None | Unset
        if isinstance(self.metadata, Unset):
            metadata = UNSET
        elif isinstance(self.metadata, BatchRequestItemsItemMetadataType0):
            metadata = self.metadata.to_dict()
        else:
            metadata = self.metadata

        payload: dict[str, Any] | None | Unset
        if isinstance(self.payload, Unset):
            payload = UNSET
        elif isinstance(self.payload, BatchRequestItemsItemPayloadType0):
            payload = self.payload.to_dict()
        else:
            payload = self.payload

        reply_to: None | str | Unset
        if isinstance(self.reply_to, Unset):
            reply_to = UNSET
        else:
            reply_to = self.reply_to

        route: None | str | Unset
        if isinstance(self.route, Unset):
            route = UNSET
        else:
            route = self.route

        send_at: None | str | Unset
        if isinstance(self.send_at, Unset):
            send_at = UNSET
        elif isinstance(self.send_at, datetime.datetime):
            send_at = self.send_at.isoformat()
        else:
            send_at = self.send_at

        subject: None | str | Unset
        if isinstance(self.subject, Unset):
            subject = UNSET
        else:
            subject = self.subject

        tags: dict[str, Any] | None | Unset
        if isinstance(self.tags, Unset):
            tags = UNSET
        elif isinstance(self.tags, BatchRequestItemsItemTagsType0):
            tags = self.tags.to_dict()
        else:
            tags = self.tags

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

        ttl_seconds: int | None | Unset
        if isinstance(self.ttl_seconds, Unset):
            ttl_seconds = UNSET
        else:
            ttl_seconds = self.ttl_seconds


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "channel": channel,
            "idempotency_key": idempotency_key,
            "to": to,
        })
        if attachments is not UNSET:
            field_dict["attachments"] = attachments
        if bcc is not UNSET:
            field_dict["bcc"] = bcc
        if blocks is not UNSET:
            field_dict["blocks"] = blocks
        if cancellation_key is not UNSET:
            field_dict["cancellation_key"] = cancellation_key
        if category is not UNSET:
            field_dict["category"] = category
        if cc is not UNSET:
            field_dict["cc"] = cc
        if data is not UNSET:
            field_dict["data"] = data
        if delivery is not UNSET:
            field_dict["delivery"] = delivery
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if from_ is not UNSET:
            field_dict["from"] = from_
        if headers is not UNSET:
            field_dict["headers"] = headers
        if html is not UNSET:
            field_dict["html"] = html
        if locale is not UNSET:
            field_dict["locale"] = locale
        if metadata is not UNSET:
            field_dict["metadata"] = metadata
        if payload is not UNSET:
            field_dict["payload"] = payload
        if reply_to is not UNSET:
            field_dict["reply_to"] = reply_to
        if route is not UNSET:
            field_dict["route"] = route
        if send_at is not UNSET:
            field_dict["send_at"] = send_at
        if subject is not UNSET:
            field_dict["subject"] = subject
        if tags is not UNSET:
            field_dict["tags"] = tags
        if template is not UNSET:
            field_dict["template"] = template
        if text is not UNSET:
            field_dict["text"] = text
        if ttl_seconds is not UNSET:
            field_dict["ttl_seconds"] = ttl_seconds

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.batch_request_items_item_blocks_type_0_item import BatchRequestItemsItemBlocksType0Item # noqa: PLC0415
        from ..models.batch_request_items_item_data_type_0 import BatchRequestItemsItemDataType0 # noqa: PLC0415
        from ..models.batch_request_items_item_headers_type_0 import BatchRequestItemsItemHeadersType0 # noqa: PLC0415
        from ..models.batch_request_items_item_metadata_type_0 import BatchRequestItemsItemMetadataType0 # noqa: PLC0415
        from ..models.batch_request_items_item_payload_type_0 import BatchRequestItemsItemPayloadType0 # noqa: PLC0415
        from ..models.batch_request_items_item_tags_type_0 import BatchRequestItemsItemTagsType0 # noqa: PLC0415
        from ..models.new_attachment import NewAttachment # noqa: PLC0415
        d = dict(src_dict)
        channel = Channel(d.pop("channel"))




        idempotency_key = d.pop("idempotency_key")

        to = d.pop("to")

        def _parse_attachments(data: object) -> list[NewAttachment] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                attachments_type_0 = []
                _attachments_type_0 = data
                for attachments_type_0_item_data in (_attachments_type_0):
                    attachments_type_0_item = NewAttachment.from_dict(attachments_type_0_item_data)



                    attachments_type_0.append(attachments_type_0_item)

                return attachments_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[NewAttachment] | None | Unset, data)

        attachments = _parse_attachments(d.pop("attachments", UNSET))


        def _parse_bcc(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                bcc_type_0 = cast(list[str], data)

                return bcc_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        bcc = _parse_bcc(d.pop("bcc", UNSET))


        def _parse_blocks(data: object) -> list[BatchRequestItemsItemBlocksType0Item] | None | Unset:
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
                    blocks_type_0_item = BatchRequestItemsItemBlocksType0Item.from_dict(blocks_type_0_item_data)



                    blocks_type_0.append(blocks_type_0_item)

                return blocks_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[BatchRequestItemsItemBlocksType0Item] | None | Unset, data)

        blocks = _parse_blocks(d.pop("blocks", UNSET))


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


        def _parse_cc(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                cc_type_0 = cast(list[str], data)

                return cc_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        cc = _parse_cc(d.pop("cc", UNSET))


        def _parse_data(data: object) -> BatchRequestItemsItemDataType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                data_type_0 = BatchRequestItemsItemDataType0.from_dict(data)



                return data_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BatchRequestItemsItemDataType0 | None | Unset, data)

        data = _parse_data(d.pop("data", UNSET))


        _delivery = d.pop("delivery", UNSET)
        delivery: Delivery | Unset
        if isinstance(_delivery,  Unset):
            delivery = UNSET
        else:
            delivery = Delivery(_delivery)




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


        def _parse_from_(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        from_ = _parse_from_(d.pop("from", UNSET))


        def _parse_headers(data: object) -> BatchRequestItemsItemHeadersType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                headers_type_0 = BatchRequestItemsItemHeadersType0.from_dict(data)



                return headers_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BatchRequestItemsItemHeadersType0 | None | Unset, data)

        headers = _parse_headers(d.pop("headers", UNSET))


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


        def _parse_metadata(data: object) -> BatchRequestItemsItemMetadataType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metadata_type_0 = BatchRequestItemsItemMetadataType0.from_dict(data)



                return metadata_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BatchRequestItemsItemMetadataType0 | None | Unset, data)

        metadata = _parse_metadata(d.pop("metadata", UNSET))


        def _parse_payload(data: object) -> BatchRequestItemsItemPayloadType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                payload_type_0 = BatchRequestItemsItemPayloadType0.from_dict(data)



                return payload_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BatchRequestItemsItemPayloadType0 | None | Unset, data)

        payload = _parse_payload(d.pop("payload", UNSET))


        def _parse_reply_to(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reply_to = _parse_reply_to(d.pop("reply_to", UNSET))


        def _parse_route(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        route = _parse_route(d.pop("route", UNSET))


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


        def _parse_subject(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        subject = _parse_subject(d.pop("subject", UNSET))


        def _parse_tags(data: object) -> BatchRequestItemsItemTagsType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                tags_type_0 = BatchRequestItemsItemTagsType0.from_dict(data)



                return tags_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BatchRequestItemsItemTagsType0 | None | Unset, data)

        tags = _parse_tags(d.pop("tags", UNSET))


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


        def _parse_ttl_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ttl_seconds = _parse_ttl_seconds(d.pop("ttl_seconds", UNSET))


        batch_request_items_item = cls(
            channel=channel,
            idempotency_key=idempotency_key,
            to=to,
            attachments=attachments,
            bcc=bcc,
            blocks=blocks,
            cancellation_key=cancellation_key,
            category=category,
            cc=cc,
            data=data,
            delivery=delivery,
            expires_at=expires_at,
            from_=from_,
            headers=headers,
            html=html,
            locale=locale,
            metadata=metadata,
            payload=payload,
            reply_to=reply_to,
            route=route,
            send_at=send_at,
            subject=subject,
            tags=tags,
            template=template,
            text=text,
            ttl_seconds=ttl_seconds,
        )

        return batch_request_items_item

