from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="CancelByKey")



@_attrs_define
class CancelByKey:
    """ `POST /v1/notifications/cancel`: exactly one of the two keys.

        Attributes:
            cancellation_key (None | str | Unset): Cancels every notification enqueued with this `cancellation_key` that is
                still queued. Example: signup-flow/user-42.
            idempotency_key (None | str | Unset): Cancels the notification enqueued under this `Idempotency-Key`, if it is
                still queued.
     """

    cancellation_key: None | str | Unset = UNSET
    idempotency_key: None | str | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        cancellation_key: None | str | Unset
        if isinstance(self.cancellation_key, Unset):
            cancellation_key = UNSET
        else:
            cancellation_key = self.cancellation_key

        idempotency_key: None | str | Unset
        if isinstance(self.idempotency_key, Unset):
            idempotency_key = UNSET
        else:
            idempotency_key = self.idempotency_key


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if cancellation_key is not UNSET:
            field_dict["cancellation_key"] = cancellation_key
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_cancellation_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cancellation_key = _parse_cancellation_key(d.pop("cancellation_key", UNSET))


        def _parse_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key", UNSET))


        cancel_by_key = cls(
            cancellation_key=cancellation_key,
            idempotency_key=idempotency_key,
        )

        return cancel_by_key

