from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.bulk_item_channel import BulkItemChannel
from ..models.reason import Reason
from typing import cast
import datetime






T = TypeVar("T", bound="BulkItem")



@_attrs_define
class BulkItem:
    """ One notification of a bulk resolution, as a person checks it before confirming.

        Attributes:
            channel (BulkItemChannel): The kind of message, and so of recipient.
            id (str):
            reason (Reason): Why a notification is in review.
            resolution (str): What this resolution does to it: `delivered`, `not_delivered + resend`, …
            route (str):
            to (str):
            waiting_since (datetime.datetime): When it ended in review.
            why (str):
     """

    channel: BulkItemChannel
    id: str
    reason: Reason
    resolution: str
    route: str
    to: str
    waiting_since: datetime.datetime
    why: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        channel = self.channel.value

        id = self.id

        reason = self.reason.value

        resolution = self.resolution

        route = self.route

        to = self.to

        waiting_since = self.waiting_since.isoformat()

        why = self.why


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "channel": channel,
            "id": id,
            "reason": reason,
            "resolution": resolution,
            "route": route,
            "to": to,
            "waiting_since": waiting_since,
            "why": why,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        channel = BulkItemChannel(d.pop("channel"))




        id = d.pop("id")

        reason = Reason(d.pop("reason"))




        resolution = d.pop("resolution")

        route = d.pop("route")

        to = d.pop("to")

        waiting_since = datetime.datetime.fromisoformat(d.pop("waiting_since"))




        why = d.pop("why")

        bulk_item = cls(
            channel=channel,
            id=id,
            reason=reason,
            resolution=resolution,
            route=route,
            to=to,
            waiting_since=waiting_since,
            why=why,
        )


        bulk_item.additional_properties = d
        return bulk_item

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
