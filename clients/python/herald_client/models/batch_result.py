from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.notification_body import NotificationBody
  from ..models.problem import Problem





T = TypeVar("T", bound="BatchResult")



@_attrs_define
class BatchResult:
    """ One item's result in a batch, in request order.

        Attributes:
            replayed (bool): The original answer was replayed for a key used before with the same body.
            status (int):
            idempotency_key (None | str | Unset):
            notification (None | NotificationBody | Unset):
            problem (None | Problem | Unset):
     """

    replayed: bool
    status: int
    idempotency_key: None | str | Unset = UNSET
    notification: None | NotificationBody | Unset = UNSET
    problem: None | Problem | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.notification_body import NotificationBody # noqa: PLC0415
        from ..models.problem import Problem # noqa: PLC0415
        replayed = self.replayed

        status = self.status

        idempotency_key: None | str | Unset
        if isinstance(self.idempotency_key, Unset):
            idempotency_key = UNSET
        else:
            idempotency_key = self.idempotency_key

        notification: dict[str, Any] | None | Unset
        if isinstance(self.notification, Unset):
            notification = UNSET
        elif isinstance(self.notification, NotificationBody):
            notification = self.notification.to_dict()
        else:
            notification = self.notification

        problem: dict[str, Any] | None | Unset
        if isinstance(self.problem, Unset):
            problem = UNSET
        elif isinstance(self.problem, Problem):
            problem = self.problem.to_dict()
        else:
            problem = self.problem


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "replayed": replayed,
            "status": status,
        })
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key
        if notification is not UNSET:
            field_dict["notification"] = notification
        if problem is not UNSET:
            field_dict["problem"] = problem

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.notification_body import NotificationBody # noqa: PLC0415
        from ..models.problem import Problem # noqa: PLC0415
        d = dict(src_dict)
        replayed = d.pop("replayed")

        status = d.pop("status")

        def _parse_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key", UNSET))


        def _parse_notification(data: object) -> None | NotificationBody | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                notification_type_1 = NotificationBody.from_dict(data)



                return notification_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | NotificationBody | Unset, data)

        notification = _parse_notification(d.pop("notification", UNSET))


        def _parse_problem(data: object) -> None | Problem | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                problem_type_1 = Problem.from_dict(data)



                return problem_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Problem | Unset, data)

        problem = _parse_problem(d.pop("problem", UNSET))


        batch_result = cls(
            replayed=replayed,
            status=status,
            idempotency_key=idempotency_key,
            notification=notification,
            problem=problem,
        )


        batch_result.additional_properties = d
        return batch_result

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
