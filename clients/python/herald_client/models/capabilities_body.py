from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="CapabilitiesBody")



@_attrs_define
class CapabilitiesBody:
    """ What the route's vendor offers, as the adapter declares it: what settles an ambiguous send.

        Attributes:
            attachments (bool): It takes an email's `attachments`.
            outcome_query (bool): The vendor can be asked what became of a send.
            tags (bool): It keeps an email's `tags`.
            idempotency_window_seconds (int | None | Unset): The vendor deduplicates a provider key for this long; `null`:
                it keeps no keys.
            max_payload_bytes (int | None | Unset):
            visibility_lag_ms (int | None | Unset): How long a send may take to show in that look-up.
     """

    attachments: bool
    outcome_query: bool
    tags: bool
    idempotency_window_seconds: int | None | Unset = UNSET
    max_payload_bytes: int | None | Unset = UNSET
    visibility_lag_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        attachments = self.attachments

        outcome_query = self.outcome_query

        tags = self.tags

        idempotency_window_seconds: int | None | Unset
        if isinstance(self.idempotency_window_seconds, Unset):
            idempotency_window_seconds = UNSET
        else:
            idempotency_window_seconds = self.idempotency_window_seconds

        max_payload_bytes: int | None | Unset
        if isinstance(self.max_payload_bytes, Unset):
            max_payload_bytes = UNSET
        else:
            max_payload_bytes = self.max_payload_bytes

        visibility_lag_ms: int | None | Unset
        if isinstance(self.visibility_lag_ms, Unset):
            visibility_lag_ms = UNSET
        else:
            visibility_lag_ms = self.visibility_lag_ms


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "attachments": attachments,
            "outcome_query": outcome_query,
            "tags": tags,
        })
        if idempotency_window_seconds is not UNSET:
            field_dict["idempotency_window_seconds"] = idempotency_window_seconds
        if max_payload_bytes is not UNSET:
            field_dict["max_payload_bytes"] = max_payload_bytes
        if visibility_lag_ms is not UNSET:
            field_dict["visibility_lag_ms"] = visibility_lag_ms

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        attachments = d.pop("attachments")

        outcome_query = d.pop("outcome_query")

        tags = d.pop("tags")

        def _parse_idempotency_window_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        idempotency_window_seconds = _parse_idempotency_window_seconds(d.pop("idempotency_window_seconds", UNSET))


        def _parse_max_payload_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_payload_bytes = _parse_max_payload_bytes(d.pop("max_payload_bytes", UNSET))


        def _parse_visibility_lag_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        visibility_lag_ms = _parse_visibility_lag_ms(d.pop("visibility_lag_ms", UNSET))


        capabilities_body = cls(
            attachments=attachments,
            outcome_query=outcome_query,
            tags=tags,
            idempotency_window_seconds=idempotency_window_seconds,
            max_payload_bytes=max_payload_bytes,
            visibility_lag_ms=visibility_lag_ms,
        )


        capabilities_body.additional_properties = d
        return capabilities_body

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
