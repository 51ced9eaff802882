from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.new_suppression_body_channel import NewSuppressionBodyChannel
from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="NewSuppressionBody")



@_attrs_define
class NewSuppressionBody:
    """ `POST /v1/suppressions`.

        Attributes:
            channel (NewSuppressionBodyChannel): The kind of message, and so of recipient.
            note (str): Why, for the audit trail. Example: asked by phone not to be mailed.
            recipient (str):  Example: ada@example.com.
            category (None | str | Unset): Only notifications of this configured category; absent: every notification.
                Example: digest.
     """

    channel: NewSuppressionBodyChannel
    note: str
    recipient: str
    category: None | str | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        channel = self.channel.value

        note = self.note

        recipient = self.recipient

        category: None | str | Unset
        if isinstance(self.category, Unset):
            category = UNSET
        else:
            category = self.category


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "channel": channel,
            "note": note,
            "recipient": recipient,
        })
        if category is not UNSET:
            field_dict["category"] = category

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        channel = NewSuppressionBodyChannel(d.pop("channel"))




        note = d.pop("note")

        recipient = d.pop("recipient")

        def _parse_category(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        category = _parse_category(d.pop("category", UNSET))


        new_suppression_body = cls(
            channel=channel,
            note=note,
            recipient=recipient,
            category=category,
        )

        return new_suppression_body

