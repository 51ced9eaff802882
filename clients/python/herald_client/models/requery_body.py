from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.evidence import Evidence
  from ..models.notification_body import NotificationBody





T = TypeVar("T", bound="RequeryBody")



@_attrs_define
class RequeryBody:
    """ 
        Attributes:
            answer (Evidence): What the provider's answer (or its absence) showed, and what settled it later. Every member
                is optional.
            notification (NotificationBody): A notification as the API shows it: with its attempts and, where a person is or
                was
                involved, its review.
            settled (bool): Whether the answer settled the ambiguity.
     """

    answer: Evidence
    notification: NotificationBody
    settled: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.evidence import Evidence # noqa: PLC0415
        from ..models.notification_body import NotificationBody # noqa: PLC0415
        answer = self.answer.to_dict()

        notification = self.notification.to_dict()

        settled = self.settled


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "answer": answer,
            "notification": notification,
            "settled": settled,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.evidence import Evidence # noqa: PLC0415
        from ..models.notification_body import NotificationBody # noqa: PLC0415
        d = dict(src_dict)
        answer = Evidence.from_dict(d.pop("answer"))




        notification = NotificationBody.from_dict(d.pop("notification"))




        settled = d.pop("settled")

        requery_body = cls(
            answer=answer,
            notification=notification,
            settled=settled,
        )


        requery_body.additional_properties = d
        return requery_body

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
