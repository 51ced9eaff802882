from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast
import datetime

if TYPE_CHECKING:
  from ..models.evidence_look_up_findings import EvidenceLookUpFindings





T = TypeVar("T", bound="EvidenceLookUp")



@_attrs_define
class EvidenceLookUp:
    """ Added when an outcome query found something that settles nothing on its own (look-alike messages it cannot
    attribute, a failed query).

        Attributes:
            at (datetime.datetime | Unset): When it looked.
            findings (EvidenceLookUpFindings | Unset): What the look-up found.
     """

    at: datetime.datetime | Unset = UNSET
    findings: EvidenceLookUpFindings | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.evidence_look_up_findings import EvidenceLookUpFindings # noqa: PLC0415
        at: str | Unset = UNSET
        if not isinstance(self.at, Unset):
            at = self.at.isoformat()

        findings: dict[str, Any] | Unset = UNSET
        if not isinstance(self.findings, Unset):
            findings = self.findings.to_dict()


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if at is not UNSET:
            field_dict["at"] = at
        if findings is not UNSET:
            field_dict["findings"] = findings

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.evidence_look_up_findings import EvidenceLookUpFindings # noqa: PLC0415
        d = dict(src_dict)
        _at = d.pop("at", UNSET)
        at: datetime.datetime | Unset
        if isinstance(_at,  Unset):
            at = UNSET
        else:
            at = datetime.datetime.fromisoformat(_at)




        _findings = d.pop("findings", UNSET)
        findings: EvidenceLookUpFindings | Unset
        if isinstance(_findings,  Unset):
            findings = UNSET
        else:
            findings = EvidenceLookUpFindings.from_dict(_findings)




        evidence_look_up = cls(
            at=at,
            findings=findings,
        )


        evidence_look_up.additional_properties = d
        return evidence_look_up

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
