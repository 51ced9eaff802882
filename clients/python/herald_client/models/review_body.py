from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.reason import Reason
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.resolution import Resolution





T = TypeVar("T", bound="ReviewBody")



@_attrs_define
class ReviewBody:
    """ Where a notification stands with review: present while it is in review, and once a person
    resolved it.

        Attributes:
            open_ (bool): Waiting for a person: in the review queue's default view (`GET /v1/review` without
                `reason`).
            resolutions (list[Resolution]):
            reason (None | Reason | Unset):
            why (None | str | Unset): One sentence for a person: why it is in review, with the last attempt's evidence.
     """

    open_: bool
    resolutions: list[Resolution]
    reason: None | Reason | Unset = UNSET
    why: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.resolution import Resolution # noqa: PLC0415
        open_ = self.open_

        resolutions = []
        for resolutions_item_data in self.resolutions:
            resolutions_item = resolutions_item_data.to_dict()
            resolutions.append(resolutions_item)



        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        elif isinstance(self.reason, Reason):
            reason = self.reason.value
        else:
            reason = self.reason

        why: None | str | Unset
        if isinstance(self.why, Unset):
            why = UNSET
        else:
            why = self.why


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "open": open_,
            "resolutions": resolutions,
        })
        if reason is not UNSET:
            field_dict["reason"] = reason
        if why is not UNSET:
            field_dict["why"] = why

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.resolution import Resolution # noqa: PLC0415
        d = dict(src_dict)
        open_ = d.pop("open")

        resolutions = []
        _resolutions = d.pop("resolutions")
        for resolutions_item_data in (_resolutions):
            resolutions_item = Resolution.from_dict(resolutions_item_data)



            resolutions.append(resolutions_item)


        def _parse_reason(data: object) -> None | Reason | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                reason_type_1 = Reason(data)



                return reason_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Reason | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))


        def _parse_why(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        why = _parse_why(d.pop("why", UNSET))


        review_body = cls(
            open_=open_,
            resolutions=resolutions,
            reason=reason,
            why=why,
        )


        review_body.additional_properties = d
        return review_body

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
