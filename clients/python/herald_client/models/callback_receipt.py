from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="CallbackReceipt")



@_attrs_define
class CallbackReceipt:
    """ What a callback request did.

        Attributes:
            events (int): Events herald understood in it (opens, clicks and the like are left out).
            new (int): Events seen for the first time, whose effects were applied.
            repeats (int): Events seen before: nothing changed for them.
            unknown (int): Events about messages never sent on this route (the vendor account may send for
                others too): left alone.
     """

    events: int
    new: int
    repeats: int
    unknown: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        events = self.events

        new = self.new

        repeats = self.repeats

        unknown = self.unknown


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "events": events,
            "new": new,
            "repeats": repeats,
            "unknown": unknown,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        events = d.pop("events")

        new = d.pop("new")

        repeats = d.pop("repeats")

        unknown = d.pop("unknown")

        callback_receipt = cls(
            events=events,
            new=new,
            repeats=repeats,
            unknown=unknown,
        )


        callback_receipt.additional_properties = d
        return callback_receipt

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
