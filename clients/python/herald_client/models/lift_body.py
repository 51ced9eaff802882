from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="LiftBody")



@_attrs_define
class LiftBody:
    """ `DELETE /v1/suppressions/{channel}/{recipient}`.

        Attributes:
            note (str): Why, for the audit trail. Example: the address works again; confirmed with the customer.
     """

    note: str





    def to_dict(self) -> dict[str, Any]:
        note = self.note


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "note": note,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        note = d.pop("note")

        lift_body = cls(
            note=note,
        )

        return lift_body

