from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.receipt_status import ReceiptStatus
from ..types import UNSET, Unset
from typing import cast
import datetime






T = TypeVar("T", bound="ReceiptBody")



@_attrs_define
class ReceiptBody:
    """ The latest receipt, or `status: none` and nulls before any callback.

        Attributes:
            status (ReceiptStatus): Where a message stands after the vendor accepted it. Ordered: a receipt only moves to a
                status of higher rank (`sent` < `delivered` < `bounced` = `undeliverable` < `complained`),
                so a `sent` arriving after `delivered` changes nothing.
            at (datetime.datetime | None | Unset):
            source (None | str | Unset):
            vendor_status (None | str | Unset):
     """

    status: ReceiptStatus
    at: datetime.datetime | None | Unset = UNSET
    source: None | str | Unset = UNSET
    vendor_status: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        status = self.status.value

        at: None | str | Unset
        if isinstance(self.at, Unset):
            at = UNSET
        elif isinstance(self.at, datetime.datetime):
            at = self.at.isoformat()
        else:
            at = self.at

        source: None | str | Unset
        if isinstance(self.source, Unset):
            source = UNSET
        else:
            source = self.source

        vendor_status: None | str | Unset
        if isinstance(self.vendor_status, Unset):
            vendor_status = UNSET
        else:
            vendor_status = self.vendor_status


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "status": status,
        })
        if at is not UNSET:
            field_dict["at"] = at
        if source is not UNSET:
            field_dict["source"] = source
        if vendor_status is not UNSET:
            field_dict["vendor_status"] = vendor_status

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        status = ReceiptStatus(d.pop("status"))




        def _parse_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                at_type_0 = datetime.datetime.fromisoformat(data)



                return at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        at = _parse_at(d.pop("at", UNSET))


        def _parse_source(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        source = _parse_source(d.pop("source", UNSET))


        def _parse_vendor_status(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        vendor_status = _parse_vendor_status(d.pop("vendor_status", UNSET))


        receipt_body = cls(
            status=status,
            at=at,
            source=source,
            vendor_status=vendor_status,
        )


        receipt_body.additional_properties = d
        return receipt_body

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
