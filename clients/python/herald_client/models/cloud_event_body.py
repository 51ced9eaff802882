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
  from ..models.cloud_event_body_data_type_0 import CloudEventBodyDataType0





T = TypeVar("T", bound="CloudEventBody")



@_attrs_define
class CloudEventBody:
    """ A CloudEvents 1.0 event in structured mode.

        Attributes:
            id (str): Unique per `source`: a repeat of (`source`, `id`) creates nothing. Example: evt-90.
            source (str):  Example: academy.exports.
            specversion (str): Must be `1.0`. Example: 1.0.
            type_ (str): Must have a mapping (`[events."…"]` in herald.toml). Example: ExportCompleted.
            data (CloudEventBodyDataType0 | None | Unset): The event's payload; a mapping renders from it (a JSON object).
            datacontenttype (None | str | Unset):  Example: application/json.
            subject (None | str | Unset):
            time (datetime.datetime | None | Unset):
     """

    id: str
    source: str
    specversion: str
    type_: str
    data: CloudEventBodyDataType0 | None | Unset = UNSET
    datacontenttype: None | str | Unset = UNSET
    subject: None | str | Unset = UNSET
    time: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.cloud_event_body_data_type_0 import CloudEventBodyDataType0 # noqa: PLC0415
        id = self.id

        source = self.source

        specversion = self.specversion

        type_ = self.type_

        data: dict[str, Any] | None | Unset
        if isinstance(self.data, Unset):
            data = UNSET
        elif isinstance(self.data, CloudEventBodyDataType0):
            data = self.data.to_dict()
        else:
            data = self.data

        datacontenttype: None | str | Unset
        if isinstance(self.datacontenttype, Unset):
            datacontenttype = UNSET
        else:
            datacontenttype = self.datacontenttype

        subject: None | str | Unset
        if isinstance(self.subject, Unset):
            subject = UNSET
        else:
            subject = self.subject

        time: None | str | Unset
        if isinstance(self.time, Unset):
            time = UNSET
        elif isinstance(self.time, datetime.datetime):
            time = self.time.isoformat()
        else:
            time = self.time


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "id": id,
            "source": source,
            "specversion": specversion,
            "type": type_,
        })
        if data is not UNSET:
            field_dict["data"] = data
        if datacontenttype is not UNSET:
            field_dict["datacontenttype"] = datacontenttype
        if subject is not UNSET:
            field_dict["subject"] = subject
        if time is not UNSET:
            field_dict["time"] = time

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.cloud_event_body_data_type_0 import CloudEventBodyDataType0 # noqa: PLC0415
        d = dict(src_dict)
        id = d.pop("id")

        source = d.pop("source")

        specversion = d.pop("specversion")

        type_ = d.pop("type")

        def _parse_data(data: object) -> CloudEventBodyDataType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                data_type_0 = CloudEventBodyDataType0.from_dict(data)



                return data_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CloudEventBodyDataType0 | None | Unset, data)

        data = _parse_data(d.pop("data", UNSET))


        def _parse_datacontenttype(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        datacontenttype = _parse_datacontenttype(d.pop("datacontenttype", UNSET))


        def _parse_subject(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        subject = _parse_subject(d.pop("subject", UNSET))


        def _parse_time(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                time_type_0 = datetime.datetime.fromisoformat(data)



                return time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        time = _parse_time(d.pop("time", UNSET))


        cloud_event_body = cls(
            id=id,
            source=source,
            specversion=specversion,
            type_=type_,
            data=data,
            datacontenttype=datacontenttype,
            subject=subject,
            time=time,
        )


        cloud_event_body.additional_properties = d
        return cloud_event_body

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
