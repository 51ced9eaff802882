from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.not_cancelled import NotCancelled





T = TypeVar("T", bound="CancelledByKey")



@_attrs_define
class CancelledByKey:
    """ What a cancellation by key did.

        Attributes:
            cancelled (list[str]): The notifications the key names that were queued and are now cancelled.
            not_cancelled (list[NotCancelled]): Those it names that it did not cancel, with the state each stands in:
                claimed,
                ended or cancelled before — or enqueued under the key while it ran (`queued`).
     """

    cancelled: list[str]
    not_cancelled: list[NotCancelled]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.not_cancelled import NotCancelled # noqa: PLC0415
        cancelled = self.cancelled



        not_cancelled = []
        for not_cancelled_item_data in self.not_cancelled:
            not_cancelled_item = not_cancelled_item_data.to_dict()
            not_cancelled.append(not_cancelled_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "cancelled": cancelled,
            "not_cancelled": not_cancelled,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.not_cancelled import NotCancelled # noqa: PLC0415
        d = dict(src_dict)
        cancelled = cast(list[str], d.pop("cancelled"))


        not_cancelled = []
        _not_cancelled = d.pop("not_cancelled")
        for not_cancelled_item_data in (_not_cancelled):
            not_cancelled_item = NotCancelled.from_dict(not_cancelled_item_data)



            not_cancelled.append(not_cancelled_item)


        cancelled_by_key = cls(
            cancelled=cancelled,
            not_cancelled=not_cancelled,
        )


        cancelled_by_key.additional_properties = d
        return cancelled_by_key

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
