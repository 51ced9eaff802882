from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="Attachment")



@_attrs_define
class Attachment:
    """ An email attachment as herald keeps it: what it is, not its bytes.

        Attributes:
            content_type (str): The MIME type, one of the configured `[attachments] content_types`.
            filename (str): The name the recipient sees: no path separators, line breaks or NUL.
            sha256 (str): The lowercase hex SHA-256 of the content: herald stores each content once by it.
            size (int): The decoded size in bytes.
     """

    content_type: str
    filename: str
    sha256: str
    size: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        content_type = self.content_type

        filename = self.filename

        sha256 = self.sha256

        size = self.size


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "content_type": content_type,
            "filename": filename,
            "sha256": sha256,
            "size": size,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        content_type = d.pop("content_type")

        filename = d.pop("filename")

        sha256 = d.pop("sha256")

        size = d.pop("size")

        attachment = cls(
            content_type=content_type,
            filename=filename,
            sha256=sha256,
            size=size,
        )


        attachment.additional_properties = d
        return attachment

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
