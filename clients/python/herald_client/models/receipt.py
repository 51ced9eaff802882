from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.receipt_status import ReceiptStatus
from typing import cast
import datetime






T = TypeVar("T", bound="Receipt")



@_attrs_define
class Receipt:
    """ One step of a notification's receipt history. The history only moves forward; its last
    step is the notification's `receipt`.

        Attributes:
            at (datetime.datetime): When the vendor says it happened (when herald heard of it, if the vendor does not say).
            source (str): Who said it: `callback:<route>`.
            status (ReceiptStatus): Where a message stands after the vendor accepted it. Ordered: a receipt only moves to a
                status of higher rank (`sent` < `delivered` < `bounced` = `undeliverable` < `complained`),
                so a `sent` arriving after `delivered` changes nothing.
            vendor_status (str): The vendor's own word for it.
     """

    at: datetime.datetime
    source: str
    status: ReceiptStatus
    vendor_status: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        source = self.source

        status = self.status.value

        vendor_status = self.vendor_status


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "at": at,
            "source": source,
            "status": status,
            "vendor_status": vendor_status,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))




        source = d.pop("source")

        status = ReceiptStatus(d.pop("status"))




        vendor_status = d.pop("vendor_status")

        receipt = cls(
            at=at,
            source=source,
            status=status,
            vendor_status=vendor_status,
        )


        receipt.additional_properties = d
        return receipt

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
