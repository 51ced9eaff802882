from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="Filter")



@_attrs_define
class Filter:
    """ The filters of `GET /v1/review`, also the `filter` of a bulk resolution.

        Attributes:
            reason (None | str | Unset): `unknown`, `duplicate_possible`, `exhausted` (dead letters that may pass),
                `rejected`
                (refused for good: final unless `[review] permanent_refusals = "review"`) or
                `contradicted` (reopened by later evidence), comma-separated; default: everything that
                waits for a person (`unknown`, `duplicate_possible`, `exhausted`, `contradicted`, and
                `rejected` where refusals wait).
            route (None | str | Unset): Only this route.
            since (None | str | Unset): Ended in review at or after this time (RFC 3339).
            until (None | str | Unset): Ended in review before this time (RFC 3339).
     """

    reason: None | str | Unset = UNSET
    route: None | str | Unset = UNSET
    since: None | str | Unset = UNSET
    until: None | str | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        route: None | str | Unset
        if isinstance(self.route, Unset):
            route = UNSET
        else:
            route = self.route

        since: None | str | Unset
        if isinstance(self.since, Unset):
            since = UNSET
        else:
            since = self.since

        until: None | str | Unset
        if isinstance(self.until, Unset):
            until = UNSET
        else:
            until = self.until


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if reason is not UNSET:
            field_dict["reason"] = reason
        if route is not UNSET:
            field_dict["route"] = route
        if since is not UNSET:
            field_dict["since"] = since
        if until is not UNSET:
            field_dict["until"] = until

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))


        def _parse_route(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        route = _parse_route(d.pop("route", UNSET))


        def _parse_since(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        since = _parse_since(d.pop("since", UNSET))


        def _parse_until(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        until = _parse_until(d.pop("until", UNSET))


        filter_ = cls(
            reason=reason,
            route=route,
            since=since,
            until=until,
        )

        return filter_

