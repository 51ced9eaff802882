from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="PaceBody")



@_attrs_define
class PaceBody:
    """ 
        Attributes:
            paused_for_ms (int): How much longer a vendor's "slow down" (a `Retry-After`) pauses the route, in this
                process; 0 when it is not paused.
            burst (int | None | Unset):
            rate_limit_per_second (float | None | Unset): herald's own limit on calls; `null`: none.
     """

    paused_for_ms: int
    burst: int | None | Unset = UNSET
    rate_limit_per_second: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        paused_for_ms = self.paused_for_ms

        burst: int | None | Unset
        if isinstance(self.burst, Unset):
            burst = UNSET
        else:
            burst = self.burst

        rate_limit_per_second: float | None | Unset
        if isinstance(self.rate_limit_per_second, Unset):
            rate_limit_per_second = UNSET
        else:
            rate_limit_per_second = self.rate_limit_per_second


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "paused_for_ms": paused_for_ms,
        })
        if burst is not UNSET:
            field_dict["burst"] = burst
        if rate_limit_per_second is not UNSET:
            field_dict["rate_limit_per_second"] = rate_limit_per_second

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        paused_for_ms = d.pop("paused_for_ms")

        def _parse_burst(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        burst = _parse_burst(d.pop("burst", UNSET))


        def _parse_rate_limit_per_second(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        rate_limit_per_second = _parse_rate_limit_per_second(d.pop("rate_limit_per_second", UNSET))


        pace_body = cls(
            paused_for_ms=paused_for_ms,
            burst=burst,
            rate_limit_per_second=rate_limit_per_second,
        )


        pace_body.additional_properties = d
        return pace_body

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
