from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.evidence_settlement_outcome import EvidenceSettlementOutcome
from ..models.settled_by import SettledBy
from ..types import UNSET, Unset
from typing import cast
import datetime

if TYPE_CHECKING:
  from ..models.evidence_settlement_evidence import EvidenceSettlementEvidence





T = TypeVar("T", bound="EvidenceSettlement")



@_attrs_define
class EvidenceSettlement:
    """ Added when a later step settled this ambiguous attempt.

        Attributes:
            at (datetime.datetime | Unset): When it was settled.
            by (SettledBy | Unset): What later settled an ambiguous attempt.
            evidence (EvidenceSettlementEvidence | Unset): What settled it: the replayed answer (`attempt`, `answer`), the
                outcome query's look-up (`look_alikes`, `query`, …), or a person's `principal` and `note`.
            outcome (EvidenceSettlementOutcome | Unset): Whether the provider had accepted the message.
     """

    at: datetime.datetime | Unset = UNSET
    by: SettledBy | Unset = UNSET
    evidence: EvidenceSettlementEvidence | Unset = UNSET
    outcome: EvidenceSettlementOutcome | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.evidence_settlement_evidence import EvidenceSettlementEvidence # noqa: PLC0415
        at: str | Unset = UNSET
        if not isinstance(self.at, Unset):
            at = self.at.isoformat()

        by: str | Unset = UNSET
        if not isinstance(self.by, Unset):
            by = self.by.value


        evidence: dict[str, Any] | Unset = UNSET
        if not isinstance(self.evidence, Unset):
            evidence = self.evidence.to_dict()

        outcome: str | Unset = UNSET
        if not isinstance(self.outcome, Unset):
            outcome = self.outcome.value



        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if at is not UNSET:
            field_dict["at"] = at
        if by is not UNSET:
            field_dict["by"] = by
        if evidence is not UNSET:
            field_dict["evidence"] = evidence
        if outcome is not UNSET:
            field_dict["outcome"] = outcome

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.evidence_settlement_evidence import EvidenceSettlementEvidence # noqa: PLC0415
        d = dict(src_dict)
        _at = d.pop("at", UNSET)
        at: datetime.datetime | Unset
        if isinstance(_at,  Unset):
            at = UNSET
        else:
            at = datetime.datetime.fromisoformat(_at)




        _by = d.pop("by", UNSET)
        by: SettledBy | Unset
        if isinstance(_by,  Unset):
            by = UNSET
        else:
            by = SettledBy(_by)




        _evidence = d.pop("evidence", UNSET)
        evidence: EvidenceSettlementEvidence | Unset
        if isinstance(_evidence,  Unset):
            evidence = UNSET
        else:
            evidence = EvidenceSettlementEvidence.from_dict(_evidence)




        _outcome = d.pop("outcome", UNSET)
        outcome: EvidenceSettlementOutcome | Unset
        if isinstance(_outcome,  Unset):
            outcome = UNSET
        else:
            outcome = EvidenceSettlementOutcome(_outcome)




        evidence_settlement = cls(
            at=at,
            by=by,
            evidence=evidence,
            outcome=outcome,
        )


        evidence_settlement.additional_properties = d
        return evidence_settlement

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
