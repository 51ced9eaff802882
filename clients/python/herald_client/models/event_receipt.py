from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast






T = TypeVar("T", bound="EventReceipt")



@_attrs_define
class EventReceipt:
    """ What became of an event.

        Attributes:
            duplicate (bool): `true` when the event was received before and nothing new was created.
            id (str):
            notification_ids (list[str]): The notifications the event created (the first time it came).
            source (str):
            type_ (str):
     """

    duplicate: bool
    id: str
    notification_ids: list[str]
    source: str
    type_: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        duplicate = self.duplicate

        id = self.id

        notification_ids = self.notification_ids



        source = self.source

        type_ = self.type_


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "duplicate": duplicate,
            "id": id,
            "notification_ids": notification_ids,
            "source": source,
            "type": type_,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        duplicate = d.pop("duplicate")

        id = d.pop("id")

        notification_ids = cast(list[str], d.pop("notification_ids"))


        source = d.pop("source")

        type_ = d.pop("type")

        event_receipt = cls(
            duplicate=duplicate,
            id=id,
            notification_ids=notification_ids,
            source=source,
            type_=type_,
        )


        event_receipt.additional_properties = d
        return event_receipt

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
