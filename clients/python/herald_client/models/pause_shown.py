from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast
import datetime






T = TypeVar("T", bound="PauseShown")



@_attrs_define
class PauseShown:
    """ An operator's pause as a tenant sees it: who and why only for the tenant that operates the
    route.

        Attributes:
            at (datetime.datetime):
            to_fallback (bool): Its work goes to the route's fallback (`true`) rather than waiting for the resume.
            note (None | str | Unset):
            principal (None | str | Unset): Who paused it (the token's principal), and why; `null` to a tenant that does not
                operate the route.
     """

    at: datetime.datetime
    to_fallback: bool
    note: None | str | Unset = UNSET
    principal: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        to_fallback = self.to_fallback

        note: None | str | Unset
        if isinstance(self.note, Unset):
            note = UNSET
        else:
            note = self.note

        principal: None | str | Unset
        if isinstance(self.principal, Unset):
            principal = UNSET
        else:
            principal = self.principal


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "at": at,
            "to_fallback": to_fallback,
        })
        if note is not UNSET:
            field_dict["note"] = note
        if principal is not UNSET:
            field_dict["principal"] = principal

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))




        to_fallback = d.pop("to_fallback")

        def _parse_note(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        note = _parse_note(d.pop("note", UNSET))


        def _parse_principal(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        principal = _parse_principal(d.pop("principal", UNSET))


        pause_shown = cls(
            at=at,
            to_fallback=to_fallback,
            note=note,
            principal=principal,
        )


        pause_shown.additional_properties = d
        return pause_shown

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
