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

if TYPE_CHECKING:
  from ..models.bulk_list_item import BulkListItem
  from ..models.filter_ import Filter





T = TypeVar("T", bound="BulkRequest")



@_attrs_define
class BulkRequest:
    """ A bulk resolution, in two steps. The dry run (`"dry_run": true`, with `outcome`, `then`,
    `filter`, `max`, or with `items`, each with its own outcome) shows what would change and
    answers a `preview`; the real run sends that `preview` with a `note` and changes exactly the
    notifications the dry run listed, with their outcomes. Anything else the real run sends
    (`outcome`, `then`, `force`, `filter`, `max`, `items`) must be what the dry run was made
    with.

        Attributes:
            dry_run (bool | Unset): List what would change and answer a preview to confirm; change nothing.
            filter_ (Filter | None | Unset):
            force (bool | None | Unset): Resend notifications that failed for a permanent cause.
            items (list[BulkListItem] | None | Unset): Instead of `filter` and one outcome: the notifications to resolve,
                each with its own
                outcome (1 to 1,000, each id once), as a person settles them after asking the vendor
                one by one.
            max_ (int | None | Unset): The most items this call may change (default and cap 1,000).
            note (None | str | Unset): Required on the real run: what you know and how, kept with every resolution.
            outcome (None | Outcome | Unset):
            preview (None | str | Unset): Real run: the `preview` a dry run answered (required unless `dry_run`).
            then (None | Then | Unset):
     """

    dry_run: bool | Unset = UNSET
    filter_: Filter | None | Unset = UNSET
    force: bool | None | Unset = UNSET
    items: list[BulkListItem] | None | Unset = UNSET
    max_: int | None | Unset = UNSET
    note: None | str | Unset = UNSET
    outcome: None | Outcome | Unset = UNSET
    preview: None | str | Unset = UNSET
    then: None | Then | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        from ..models.bulk_list_item import BulkListItem # noqa: PLC0415
        from ..models.filter_ import Filter # noqa: PLC0415
        dry_run = self.dry_run

        filter_: dict[str, Any] | None | Unset
        if isinstance(self.filter_, Unset):
            filter_ = UNSET
        elif isinstance(self.filter_, Filter):
            filter_ = self.filter_.to_dict()
        else:
            filter_ = self.filter_

        force: bool | None | Unset
        if isinstance(self.force, Unset):
            force = UNSET
        else:
            force = self.force

        items: list[dict[str, Any]] | None | Unset
        if isinstance(self.items, Unset):
            items = UNSET
        elif isinstance(self.items, list):
            items = []
            for items_type_0_item_data in self.items:
                items_type_0_item = items_type_0_item_data.to_dict()
                items.append(items_type_0_item)


        else:
            items = self.items

        max_: int | None | Unset
        if isinstance(self.max_, Unset):
            max_ = UNSET
        else:
            max_ = self.max_

        note: None | str | Unset
        if isinstance(self.note, Unset):
            note = UNSET
        else:
            note = self.note

        outcome: None | str | Unset
        if isinstance(self.outcome, Unset):
            outcome = UNSET
        elif isinstance(self.outcome, Outcome):
            outcome = self.outcome.value
        else:
            outcome = self.outcome

        preview: None | str | Unset
        if isinstance(self.preview, Unset):
            preview = UNSET
        else:
            preview = self.preview

        then: None | str | Unset
        if isinstance(self.then, Unset):
            then = UNSET
        elif isinstance(self.then, Then):
            then = self.then.value
        else:
            then = self.then


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if dry_run is not UNSET:
            field_dict["dry_run"] = dry_run
        if filter_ is not UNSET:
            field_dict["filter"] = filter_
        if force is not UNSET:
            field_dict["force"] = force
        if items is not UNSET:
            field_dict["items"] = items
        if max_ is not UNSET:
            field_dict["max"] = max_
        if note is not UNSET:
            field_dict["note"] = note
        if outcome is not UNSET:
            field_dict["outcome"] = outcome
        if preview is not UNSET:
            field_dict["preview"] = preview
        if then is not UNSET:
            field_dict["then"] = then

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.bulk_list_item import BulkListItem # noqa: PLC0415
        from ..models.filter_ import Filter # noqa: PLC0415
        d = dict(src_dict)
        dry_run = d.pop("dry_run", UNSET)

        def _parse_filter_(data: object) -> Filter | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                filter_type_1 = Filter.from_dict(data)



                return filter_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Filter | None | Unset, data)

        filter_ = _parse_filter_(d.pop("filter", UNSET))


        def _parse_force(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        force = _parse_force(d.pop("force", UNSET))


        def _parse_items(data: object) -> list[BulkListItem] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                items_type_0 = []
                _items_type_0 = data
                for items_type_0_item_data in (_items_type_0):
                    items_type_0_item = BulkListItem.from_dict(items_type_0_item_data)



                    items_type_0.append(items_type_0_item)

                return items_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[BulkListItem] | None | Unset, data)

        items = _parse_items(d.pop("items", UNSET))


        def _parse_max_(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_ = _parse_max_(d.pop("max", UNSET))


        def _parse_note(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        note = _parse_note(d.pop("note", UNSET))


        def _parse_outcome(data: object) -> None | Outcome | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                outcome_type_1 = Outcome(data)



                return outcome_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Outcome | Unset, data)

        outcome = _parse_outcome(d.pop("outcome", UNSET))


        def _parse_preview(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        preview = _parse_preview(d.pop("preview", UNSET))


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


        bulk_request = cls(
            dry_run=dry_run,
            filter_=filter_,
            force=force,
            items=items,
            max_=max_,
            note=note,
            outcome=outcome,
            preview=preview,
            then=then,
        )

        return bulk_request

