from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="CircuitBody")



@_attrs_define
class CircuitBody:
    """ 
        Attributes:
            open_seconds (int):
            state (str): `closed`, `open` or `half_open`, in this process.
            failures_to_open (int | None | Unset): Known-not-sent failures in a row that open it; `null`: it never opens.
     """

    open_seconds: int
    state: str
    failures_to_open: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        open_seconds = self.open_seconds

        state = self.state

        failures_to_open: int | None | Unset
        if isinstance(self.failures_to_open, Unset):
            failures_to_open = UNSET
        else:
            failures_to_open = self.failures_to_open


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "open_seconds": open_seconds,
            "state": state,
        })
        if failures_to_open is not UNSET:
            field_dict["failures_to_open"] = failures_to_open

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        open_seconds = d.pop("open_seconds")

        state = d.pop("state")

        def _parse_failures_to_open(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        failures_to_open = _parse_failures_to_open(d.pop("failures_to_open", UNSET))


        circuit_body = cls(
            open_seconds=open_seconds,
            state=state,
            failures_to_open=failures_to_open,
        )


        circuit_body.additional_properties = d
        return circuit_body

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
