from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.attachment import Attachment
  from ..models.email_options_headers import EmailOptionsHeaders
  from ..models.email_options_tags import EmailOptionsTags





T = TypeVar("T", bound="EmailOptions")



@_attrs_define
class EmailOptions:
    """ The parts of an email besides its recipient and content, as herald's API accepted them:
    every address checked, the sender one the route allows, tags of letters, digits, `_` and
    `-`, and headers free of line breaks and of the names an adapter writes itself (sender,
    recipients, subject, Message-ID, MIME structure). Empty on every other channel.

        Attributes:
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
     """

    attachments: list[Attachment] | Unset = UNSET
    bcc: list[str] | Unset = UNSET
    cc: list[str] | Unset = UNSET
    from_: None | str | Unset = UNSET
    headers: EmailOptionsHeaders | Unset = UNSET
    reply_to: None | str | Unset = UNSET
    tags: EmailOptionsTags | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.attachment import Attachment # noqa: PLC0415
        from ..models.email_options_headers import EmailOptionsHeaders # noqa: PLC0415
        from ..models.email_options_tags import EmailOptionsTags # noqa: PLC0415
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


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
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

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.attachment import Attachment # noqa: PLC0415
        from ..models.email_options_headers import EmailOptionsHeaders # noqa: PLC0415
        from ..models.email_options_tags import EmailOptionsTags # noqa: PLC0415
        d = dict(src_dict)
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




        email_options = cls(
            attachments=attachments,
            bcc=bcc,
            cc=cc,
            from_=from_,
            headers=headers,
            reply_to=reply_to,
            tags=tags,
        )


        email_options.additional_properties = d
        return email_options

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
