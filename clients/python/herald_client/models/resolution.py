from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.certainty import Certainty
from ..models.state import State
from ..types import UNSET, Unset
from typing import cast
import datetime






T = TypeVar("T", bound="Resolution")



@_attrs_define
class Resolution:
    """ A person's resolution of a notification under review: the audit record, append-only.

        Attributes:
            at (datetime.datetime):
            forced (bool): A resend insisted on: of a notification that failed for a permanent cause, or past its
                expiry (which then holds no more).
            key_renewed (bool): The resend went out under a new provider key: the vendor's idempotency window had
                passed, so a wrong "not delivered" may now deliver twice — a risk the person accepted.
            note (str):
            outcome (str): `delivered`, `not_delivered` or `acknowledged`.
            principal (str): The token's principal.
            certainty_after (Certainty | None | Unset):
            certainty_before (Certainty | None | Unset):
            state_after (None | State | Unset):
            state_before (None | State | Unset):
            then (None | str | Unset): `resend` or `close`, after `not_delivered`.
     """

    at: datetime.datetime
    forced: bool
    key_renewed: bool
    note: str
    outcome: str
    principal: str
    certainty_after: Certainty | None | Unset = UNSET
    certainty_before: Certainty | None | Unset = UNSET
    state_after: None | State | Unset = UNSET
    state_before: None | State | Unset = UNSET
    then: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        forced = self.forced

        key_renewed = self.key_renewed

        note = self.note

        outcome = self.outcome

        principal = self.principal

        certainty_after: None | str | Unset
        if isinstance(self.certainty_after, Unset):
            certainty_after = UNSET
        elif isinstance(self.certainty_after, Certainty):
            certainty_after = self.certainty_after.value
        else:
            certainty_after = self.certainty_after

        certainty_before: None | str | Unset
        if isinstance(self.certainty_before, Unset):
            certainty_before = UNSET
        elif isinstance(self.certainty_before, Certainty):
            certainty_before = self.certainty_before.value
        else:
            certainty_before = self.certainty_before

        state_after: None | str | Unset
        if isinstance(self.state_after, Unset):
            state_after = UNSET
        elif isinstance(self.state_after, State):
            state_after = self.state_after.value
        else:
            state_after = self.state_after

        state_before: None | str | Unset
        if isinstance(self.state_before, Unset):
            state_before = UNSET
        elif isinstance(self.state_before, State):
            state_before = self.state_before.value
        else:
            state_before = self.state_before

        then: None | str | Unset
        if isinstance(self.then, Unset):
            then = UNSET
        else:
            then = self.then


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "at": at,
            "forced": forced,
            "key_renewed": key_renewed,
            "note": note,
            "outcome": outcome,
            "principal": principal,
        })
        if certainty_after is not UNSET:
            field_dict["certainty_after"] = certainty_after
        if certainty_before is not UNSET:
            field_dict["certainty_before"] = certainty_before
        if state_after is not UNSET:
            field_dict["state_after"] = state_after
        if state_before is not UNSET:
            field_dict["state_before"] = state_before
        if then is not UNSET:
            field_dict["then"] = then

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))




        forced = d.pop("forced")

        key_renewed = d.pop("key_renewed")

        note = d.pop("note")

        outcome = d.pop("outcome")

        principal = d.pop("principal")

        def _parse_certainty_after(data: object) -> Certainty | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                certainty_after_type_1 = Certainty(data)



                return certainty_after_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Certainty | None | Unset, data)

        certainty_after = _parse_certainty_after(d.pop("certainty_after", UNSET))


        def _parse_certainty_before(data: object) -> Certainty | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                certainty_before_type_1 = Certainty(data)



                return certainty_before_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Certainty | None | Unset, data)

        certainty_before = _parse_certainty_before(d.pop("certainty_before", UNSET))


        def _parse_state_after(data: object) -> None | State | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                state_after_type_1 = State(data)



                return state_after_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | State | Unset, data)

        state_after = _parse_state_after(d.pop("state_after", UNSET))


        def _parse_state_before(data: object) -> None | State | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                state_before_type_1 = State(data)



                return state_before_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | State | Unset, data)

        state_before = _parse_state_before(d.pop("state_before", UNSET))


        def _parse_then(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        then = _parse_then(d.pop("then", UNSET))


        resolution = cls(
            at=at,
            forced=forced,
            key_renewed=key_renewed,
            note=note,
            outcome=outcome,
            principal=principal,
            certainty_after=certainty_after,
            certainty_before=certainty_before,
            state_after=state_after,
            state_before=state_before,
            then=then,
        )


        resolution.additional_properties = d
        return resolution

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
