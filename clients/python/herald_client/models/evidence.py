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
  from ..models.evidence_late_result import EvidenceLateResult
  from ..models.evidence_look_up import EvidenceLookUp
  from ..models.evidence_settlement import EvidenceSettlement





T = TypeVar("T", bound="Evidence")



@_attrs_define
class Evidence:
    """ What the provider's answer (or its absence) showed, and what settled it later. Every member is optional.

        Attributes:
            at (datetime.datetime | Unset): When herald wrote this evidence.
            checked_at (datetime.datetime | Unset): When the worker last read the clock before writing the request (then
                before the send deadline); absent where herald refused it without a call.
            detail (Any | Unset): Any JSON value: the provider's answer as JSON when it was a JSON object or array;
                otherwise text: an error, an answer that is not JSON, or a JSON answer that was cut at 512 bytes or holds
                escaped characters (kept as sent).
            late_result (EvidenceLateResult | Unset): The result of this attempt that arrived after its lease had ended:
                kept as evidence only, never as the result.
            late_result_reviewed (bool | Unset): Present (true) once a person resolved the notification after a
                `late_result` that said its request may have left late: that possibility was theirs to weigh, and is not held
                against their resolution again.
            look_up (EvidenceLookUp | Unset): Added when an outcome query found something that settles nothing on its own
                (look-alike messages it cannot attribute, a failed query).
            may_have_left_late (bool | Unset): Present (true) where this ambiguous call ended after the moment its send
                deadline promised (the deadline, the route's timeout and 1 s): its worker was held up, and its request may have
                reached the vendor after another worker looked it up and found nothing. Held against the record like an
                acceptance that may have been.
            settlement (EvidenceSettlement | Unset): Added when a later step settled this ambiguous attempt.
            stage (str | Unset): Where the exchange stood when it ended, e.g. `connect`, `awaiting_response`, `response`,
                `query`, `lease_expired`.
            status (int | Unset): The provider's HTTP status or SMTP reply code.
            vendor_code (str | Unset): The provider's own error code.
     """

    at: datetime.datetime | Unset = UNSET
    checked_at: datetime.datetime | Unset = UNSET
    detail: Any | Unset = UNSET
    late_result: EvidenceLateResult | Unset = UNSET
    late_result_reviewed: bool | Unset = UNSET
    look_up: EvidenceLookUp | Unset = UNSET
    may_have_left_late: bool | Unset = UNSET
    settlement: EvidenceSettlement | Unset = UNSET
    stage: str | Unset = UNSET
    status: int | Unset = UNSET
    vendor_code: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.evidence_late_result import EvidenceLateResult # noqa: PLC0415
        from ..models.evidence_look_up import EvidenceLookUp # noqa: PLC0415
        from ..models.evidence_settlement import EvidenceSettlement # noqa: PLC0415
        at: str | Unset = UNSET
        if not isinstance(self.at, Unset):
            at = self.at.isoformat()

        checked_at: str | Unset = UNSET
        if not isinstance(self.checked_at, Unset):
            checked_at = self.checked_at.isoformat()

        detail = self.detail

        late_result: dict[str, Any] | Unset = UNSET
        if not isinstance(self.late_result, Unset):
            late_result = self.late_result.to_dict()

        late_result_reviewed = self.late_result_reviewed

        look_up: dict[str, Any] | Unset = UNSET
        if not isinstance(self.look_up, Unset):
            look_up = self.look_up.to_dict()

        may_have_left_late = self.may_have_left_late

        settlement: dict[str, Any] | Unset = UNSET
        if not isinstance(self.settlement, Unset):
            settlement = self.settlement.to_dict()

        stage = self.stage

        status = self.status

        vendor_code = self.vendor_code


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if at is not UNSET:
            field_dict["at"] = at
        if checked_at is not UNSET:
            field_dict["checked_at"] = checked_at
        if detail is not UNSET:
            field_dict["detail"] = detail
        if late_result is not UNSET:
            field_dict["late_result"] = late_result
        if late_result_reviewed is not UNSET:
            field_dict["late_result_reviewed"] = late_result_reviewed
        if look_up is not UNSET:
            field_dict["look_up"] = look_up
        if may_have_left_late is not UNSET:
            field_dict["may_have_left_late"] = may_have_left_late
        if settlement is not UNSET:
            field_dict["settlement"] = settlement
        if stage is not UNSET:
            field_dict["stage"] = stage
        if status is not UNSET:
            field_dict["status"] = status
        if vendor_code is not UNSET:
            field_dict["vendor_code"] = vendor_code

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.evidence_late_result import EvidenceLateResult # noqa: PLC0415
        from ..models.evidence_look_up import EvidenceLookUp # noqa: PLC0415
        from ..models.evidence_settlement import EvidenceSettlement # noqa: PLC0415
        d = dict(src_dict)
        _at = d.pop("at", UNSET)
        at: datetime.datetime | Unset
        if isinstance(_at,  Unset):
            at = UNSET
        else:
            at = datetime.datetime.fromisoformat(_at)




        _checked_at = d.pop("checked_at", UNSET)
        checked_at: datetime.datetime | Unset
        if isinstance(_checked_at,  Unset):
            checked_at = UNSET
        else:
            checked_at = datetime.datetime.fromisoformat(_checked_at)




        detail = d.pop("detail", UNSET)

        _late_result = d.pop("late_result", UNSET)
        late_result: EvidenceLateResult | Unset
        if isinstance(_late_result,  Unset):
            late_result = UNSET
        else:
            late_result = EvidenceLateResult.from_dict(_late_result)




        late_result_reviewed = d.pop("late_result_reviewed", UNSET)

        _look_up = d.pop("look_up", UNSET)
        look_up: EvidenceLookUp | Unset
        if isinstance(_look_up,  Unset):
            look_up = UNSET
        else:
            look_up = EvidenceLookUp.from_dict(_look_up)




        may_have_left_late = d.pop("may_have_left_late", UNSET)

        _settlement = d.pop("settlement", UNSET)
        settlement: EvidenceSettlement | Unset
        if isinstance(_settlement,  Unset):
            settlement = UNSET
        else:
            settlement = EvidenceSettlement.from_dict(_settlement)




        stage = d.pop("stage", UNSET)

        status = d.pop("status", UNSET)

        vendor_code = d.pop("vendor_code", UNSET)

        evidence = cls(
            at=at,
            checked_at=checked_at,
            detail=detail,
            late_result=late_result,
            late_result_reviewed=late_result_reviewed,
            look_up=look_up,
            may_have_left_late=may_have_left_late,
            settlement=settlement,
            stage=stage,
            status=status,
            vendor_code=vendor_code,
        )


        evidence.additional_properties = d
        return evidence

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
