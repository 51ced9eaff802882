from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.outcome import Outcome
from ..models.then import Then
from ..types import UNSET, Unset
from typing import cast
from uuid import UUID






T = TypeVar("T", bound="BulkListItem")



@_attrs_define
class BulkListItem:
    """ One notification of a list, with the resolution a person chose for it.

        Attributes:
            id (UUID):
            outcome (Outcome): What a person says.
            force (bool | Unset): Resend one that failed for a permanent cause.
            then (None | Then | Unset):
     """

    id: UUID
    outcome: Outcome
    force: bool | Unset = UNSET
    then: None | Then | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        outcome = self.outcome.value

        force = self.force

        then: None | str | Unset
        if isinstance(self.then, Unset):
            then = UNSET
        elif isinstance(self.then, Then):
            then = self.then.value
        else:
            then = self.then


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "id": id,
            "outcome": outcome,
        })
        if force is not UNSET:
            field_dict["force"] = force
        if then is not UNSET:
            field_dict["then"] = then

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))




        outcome = Outcome(d.pop("outcome"))




        force = d.pop("force", UNSET)

        def _parse_then(data: object) -> None | Then | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                then_type_1 = Then(data)



                return then_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Then | Unset, data)

        then = _parse_then(d.pop("then", UNSET))


        bulk_list_item = cls(
            id=id,
            outcome=outcome,
            force=force,
            then=then,
        )

        return bulk_list_item

