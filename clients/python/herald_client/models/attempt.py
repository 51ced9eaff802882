from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.attempt_result import AttemptResult
from ..models.settled_by import SettledBy
from ..types import UNSET, Unset
from typing import cast
import datetime

if TYPE_CHECKING:
  from ..models.evidence import Evidence





T = TypeVar("T", bound="Attempt")



@_attrs_define
class Attempt:
    """ One try at handing a notification to its provider. Append-only: a later settlement adds
    `settled_by` and its evidence but never rewrites what the attempt itself saw.

        Attributes:
            evidence (Evidence): What the provider's answer (or its absence) showed, and what settled it later. Every member
                is optional.
            n (int):
            provider_idempotency_key (str):
            result (AttemptResult): The result of one attempt. `in_flight` is written before the call; the others after.
            route (str):
            send_deadline (datetime.datetime): Its call to the vendor started no later than this, or not at all, and was cut
                at the
                route's timeout: every proof that the vendor did not take it rests on this time.
            started_at (datetime.datetime):
            finished_at (datetime.datetime | None | Unset):
            permanent (bool | None | Unset): For `rejected`: whether the provider refused for good.
            provider_ref (None | str | Unset):
            settled_by (None | SettledBy | Unset):
     """

    evidence: Evidence
    n: int
    provider_idempotency_key: str
    result: AttemptResult
    route: str
    send_deadline: datetime.datetime
    started_at: datetime.datetime
    finished_at: datetime.datetime | None | Unset = UNSET
    permanent: bool | None | Unset = UNSET
    provider_ref: None | str | Unset = UNSET
    settled_by: None | SettledBy | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.evidence import Evidence # noqa: PLC0415
        evidence = self.evidence.to_dict()

        n = self.n

        provider_idempotency_key = self.provider_idempotency_key

        result = self.result.value

        route = self.route

        send_deadline = self.send_deadline.isoformat()

        started_at = self.started_at.isoformat()

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        permanent: bool | None | Unset
        if isinstance(self.permanent, Unset):
            permanent = UNSET
        else:
            permanent = self.permanent

        provider_ref: None | str | Unset
        if isinstance(self.provider_ref, Unset):
            provider_ref = UNSET
        else:
            provider_ref = self.provider_ref

        settled_by: None | str | Unset
        if isinstance(self.settled_by, Unset):
            settled_by = UNSET
        elif isinstance(self.settled_by, SettledBy):
            settled_by = self.settled_by.value
        else:
            settled_by = self.settled_by


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "evidence": evidence,
            "n": n,
            "provider_idempotency_key": provider_idempotency_key,
            "result": result,
            "route": route,
            "send_deadline": send_deadline,
            "started_at": started_at,
        })
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if permanent is not UNSET:
            field_dict["permanent"] = permanent
        if provider_ref is not UNSET:
            field_dict["provider_ref"] = provider_ref
        if settled_by is not UNSET:
            field_dict["settled_by"] = settled_by

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.evidence import Evidence # noqa: PLC0415
        d = dict(src_dict)
        evidence = Evidence.from_dict(d.pop("evidence"))




        n = d.pop("n")

        provider_idempotency_key = d.pop("provider_idempotency_key")

        result = AttemptResult(d.pop("result"))




        route = d.pop("route")

        send_deadline = datetime.datetime.fromisoformat(d.pop("send_deadline"))




        started_at = datetime.datetime.fromisoformat(d.pop("started_at"))




        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)



                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))


        def _parse_permanent(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        permanent = _parse_permanent(d.pop("permanent", UNSET))


        def _parse_provider_ref(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        provider_ref = _parse_provider_ref(d.pop("provider_ref", UNSET))


        def _parse_settled_by(data: object) -> None | SettledBy | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                settled_by_type_1 = SettledBy(data)



                return settled_by_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | SettledBy | Unset, data)

        settled_by = _parse_settled_by(d.pop("settled_by", UNSET))


        attempt = cls(
            evidence=evidence,
            n=n,
            provider_idempotency_key=provider_idempotency_key,
            result=result,
            route=route,
            send_deadline=send_deadline,
            started_at=started_at,
            finished_at=finished_at,
            permanent=permanent,
            provider_ref=provider_ref,
            settled_by=settled_by,
        )


        attempt.additional_properties = d
        return attempt

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
