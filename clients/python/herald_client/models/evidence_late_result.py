from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.attempt_result import AttemptResult
from ..types import UNSET, Unset
from typing import cast
import datetime

if TYPE_CHECKING:
  from ..models.evidence import Evidence





T = TypeVar("T", bound="EvidenceLateResult")



@_attrs_define
class EvidenceLateResult:
    """ The result of this attempt that arrived after its lease had ended: kept as evidence only, never as the result.

        Attributes:
            at (datetime.datetime | Unset): When it came.
            evidence (Evidence | Unset): What the provider's answer (or its absence) showed, and what settled it later.
                Every member is optional.
            provider_ref (None | str | Unset):
            result (AttemptResult | Unset): The result of one attempt. `in_flight` is written before the call; the others
                after.
     """

    at: datetime.datetime | Unset = UNSET
    evidence: Evidence | Unset = UNSET
    provider_ref: None | str | Unset = UNSET
    result: AttemptResult | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.evidence import Evidence # noqa: PLC0415
        at: str | Unset = UNSET
        if not isinstance(self.at, Unset):
            at = self.at.isoformat()

        evidence: dict[str, Any] | Unset = UNSET
        if not isinstance(self.evidence, Unset):
            evidence = self.evidence.to_dict()

        provider_ref: None | str | Unset
        if isinstance(self.provider_ref, Unset):
            provider_ref = UNSET
        else:
            provider_ref = self.provider_ref

        result: str | Unset = UNSET
        if not isinstance(self.result, Unset):
            result = self.result.value



        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if at is not UNSET:
            field_dict["at"] = at
        if evidence is not UNSET:
            field_dict["evidence"] = evidence
        if provider_ref is not UNSET:
            field_dict["provider_ref"] = provider_ref
        if result is not UNSET:
            field_dict["result"] = result

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.evidence import Evidence # noqa: PLC0415
        d = dict(src_dict)
        _at = d.pop("at", UNSET)
        at: datetime.datetime | Unset
        if isinstance(_at,  Unset):
            at = UNSET
        else:
            at = datetime.datetime.fromisoformat(_at)




        _evidence = d.pop("evidence", UNSET)
        evidence: Evidence | Unset
        if isinstance(_evidence,  Unset):
            evidence = UNSET
        else:
            evidence = Evidence.from_dict(_evidence)




        def _parse_provider_ref(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        provider_ref = _parse_provider_ref(d.pop("provider_ref", UNSET))


        _result = d.pop("result", UNSET)
        result: AttemptResult | Unset
        if isinstance(_result,  Unset):
            result = UNSET
        else:
            result = AttemptResult(_result)




        evidence_late_result = cls(
            at=at,
            evidence=evidence,
            provider_ref=provider_ref,
            result=result,
        )


        evidence_late_result.additional_properties = d
        return evidence_late_result

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
