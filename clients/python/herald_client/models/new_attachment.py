from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="NewAttachment")



@_attrs_define
class NewAttachment:
    """ One attachment as the client sends it.

        Attributes:
            content (str): The content, base64 (RFC 4648, padded).
            content_type (str): One of the configured `[attachments] content_types`. Example: application/pdf.
            filename (str): The name the recipient sees: 1 to 255 bytes, no `/`, `\\`, control, invisible or
                bidirectional characters, no encoded word, not ending in a dot or a space; an extension,
                where it has one, of the declared type. Example: invoice-2026-12.pdf.
     """

    content: str
    content_type: str
    filename: str





    def to_dict(self) -> dict[str, Any]:
        content = self.content

        content_type = self.content_type

        filename = self.filename


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "content": content,
            "content_type": content_type,
            "filename": filename,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        content = d.pop("content")

        content_type = d.pop("content_type")

        filename = d.pop("filename")

        new_attachment = cls(
            content=content,
            content_type=content_type,
            filename=filename,
        )

        return new_attachment

