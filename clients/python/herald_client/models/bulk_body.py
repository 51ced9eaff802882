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
  from ..models.bulk_item import BulkItem
  from ..models.bulk_refusal import BulkRefusal





T = TypeVar("T", bound="BulkBody")



@_attrs_define
class BulkBody:
    """ 
        Attributes:
            dry_run (bool):
            ids (list[str]): The notifications that would change (dry run) or did.
            items (list[BulkItem]): The same notifications as a person reads them: recipient, route, why, since when.
            more (bool): More items matched than `max` allowed; run again for the rest.
            refused (list[BulkRefusal]): Items that this resolution does not apply to (or no longer applies to), with why.
            expires_at (datetime.datetime | None | Unset):
            preview (None | str | Unset): Dry run: the token to confirm exactly these `ids` with this outcome (`null` when
                nothing
                would change). It can be confirmed once, until `expires_at`.
     """

    dry_run: bool
    ids: list[str]
    items: list[BulkItem]
    more: bool
    refused: list[BulkRefusal]
    expires_at: datetime.datetime | None | Unset = UNSET
    preview: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.bulk_item import BulkItem # noqa: PLC0415
        from ..models.bulk_refusal import BulkRefusal # noqa: PLC0415
        dry_run = self.dry_run

        ids = self.ids



        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)



        more = self.more

        refused = []
        for refused_item_data in self.refused:
            refused_item = refused_item_data.to_dict()
            refused.append(refused_item)



        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        preview: None | str | Unset
        if isinstance(self.preview, Unset):
            preview = UNSET
        else:
            preview = self.preview


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "dry_run": dry_run,
            "ids": ids,
            "items": items,
            "more": more,
            "refused": refused,
        })
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if preview is not UNSET:
            field_dict["preview"] = preview

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.bulk_item import BulkItem # noqa: PLC0415
        from ..models.bulk_refusal import BulkRefusal # noqa: PLC0415
        d = dict(src_dict)
        dry_run = d.pop("dry_run")

        ids = cast(list[str], d.pop("ids"))


        items = []
        _items = d.pop("items")
        for items_item_data in (_items):
            items_item = BulkItem.from_dict(items_item_data)



            items.append(items_item)


        more = d.pop("more")

        refused = []
        _refused = d.pop("refused")
        for refused_item_data in (_refused):
            refused_item = BulkRefusal.from_dict(refused_item_data)



            refused.append(refused_item)


        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)



                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))


        def _parse_preview(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        preview = _parse_preview(d.pop("preview", UNSET))


        bulk_body = cls(
            dry_run=dry_run,
            ids=ids,
            items=items,
            more=more,
            refused=refused,
            expires_at=expires_at,
            preview=preview,
        )


        bulk_body.additional_properties = d
        return bulk_body

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
