from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset






T = TypeVar("T", bound="PauseBody")



@_attrs_define
class PauseBody:
    """ `POST /v1/routes/{name}/pause`.

        Attributes:
            note (str): Why, for the audit trail. Example: the vendor is sending duplicates; waiting for their incident to
                end.
            to_fallback (bool | Unset): Send the route's work to its fallback meanwhile, rather than hold it until the
                resume;
                only on a route that has one.
     """

    note: str
    to_fallback: bool | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        note = self.note

        to_fallback = self.to_fallback


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "note": note,
        })
        if to_fallback is not UNSET:
            field_dict["to_fallback"] = to_fallback

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        note = d.pop("note")

        to_fallback = d.pop("to_fallback", UNSET)

        pause_body = cls(
            note=note,
            to_fallback=to_fallback,
        )

        return pause_body

