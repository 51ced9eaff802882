from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.channel import Channel
from ..models.suppression_reason import SuppressionReason
from ..types import UNSET, Unset
from typing import cast
import datetime

if TYPE_CHECKING:
  from ..models.suppression_evidence import SuppressionEvidence





T = TypeVar("T", bound="Suppression")



@_attrs_define
class Suppression:
    """ A recipient a tenant's notifications on one channel are not sent to.

        Attributes:
            channel (Channel): The kind of message, and so of recipient.
            created_at (datetime.datetime):
            evidence (SuppressionEvidence): What showed it: the vendor's event or answer, or nothing for one added by hand.
            reason (SuppressionReason): Why a recipient is suppressed.
            recipient (str):
            source (str): Who added it: `callback:<route>`, `send:<route>` (the vendor refused the recipient), or
                the principal of the token that added it by hand.
            category (None | str | Unset): Only notifications of this category (a one-click unsubscribe from it); `null`:
                every
                notification to the recipient on the channel.
            note (None | str | Unset):
     """

    channel: Channel
    created_at: datetime.datetime
    evidence: SuppressionEvidence
    reason: SuppressionReason
    recipient: str
    source: str
    category: None | str | Unset = UNSET
    note: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.suppression_evidence import SuppressionEvidence # noqa: PLC0415
        channel = self.channel.value

        created_at = self.created_at.isoformat()

        evidence = self.evidence.to_dict()

        reason = self.reason.value

        recipient = self.recipient

        source = self.source

        category: None | str | Unset
        if isinstance(self.category, Unset):
            category = UNSET
        else:
            category = self.category

        note: None | str | Unset
        if isinstance(self.note, Unset):
            note = UNSET
        else:
            note = self.note


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "channel": channel,
            "created_at": created_at,
            "evidence": evidence,
            "reason": reason,
            "recipient": recipient,
            "source": source,
        })
        if category is not UNSET:
            field_dict["category"] = category
        if note is not UNSET:
            field_dict["note"] = note

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.suppression_evidence import SuppressionEvidence # noqa: PLC0415
        d = dict(src_dict)
        channel = Channel(d.pop("channel"))




        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))




        evidence = SuppressionEvidence.from_dict(d.pop("evidence"))




        reason = SuppressionReason(d.pop("reason"))




        recipient = d.pop("recipient")

        source = d.pop("source")

        def _parse_category(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        category = _parse_category(d.pop("category", UNSET))


        def _parse_note(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        note = _parse_note(d.pop("note", UNSET))


        suppression = cls(
            channel=channel,
            created_at=created_at,
            evidence=evidence,
            reason=reason,
            recipient=recipient,
            source=source,
            category=category,
            note=note,
        )


        suppression.additional_properties = d
        return suppression

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
