from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.capabilities_body import CapabilitiesBody
  from ..models.circuit_body import CircuitBody
  from ..models.pace_body import PaceBody
  from ..models.pause_shown import PauseShown





T = TypeVar("T", bound="RouteBody")



@_attrs_define
class RouteBody:
    """ 
        Attributes:
            capabilities (CapabilitiesBody): What the route's vendor offers, as the adapter declares it: what settles an
                ambiguous send.
            channels (list[str]): The channels it carries, and those it is the default route of.
            circuit (CircuitBody):
            concurrency (int): Sends in flight at once, one call's limit, and the caps on tries.
            default_for (list[str]):
            delivery (str): The delivery policy of notifications that do not choose one.
            max_age_seconds (int):
            max_attempts (int):
            name (str):
            operable (bool): Whether this token may pause and resume it: its tenant operates the route.
            pace (PaceBody):
            provider (str): The adapter: the route's `provider`; this build has `sandbox`, `webhook`, `resend`, `smtp`,
                `twilio`, `mailjet`, `onesignal`, `sparkpost`, `postmark`, `sendgrid`, `telnyx`, `ses`, `fcm`, `apns`, `slack`.
            timeout_seconds (int):
            fallback (None | str | Unset): Where its notifications go once it is known not to have taken them.
            paused_by_operator (None | PauseShown | Unset):
     """

    capabilities: CapabilitiesBody
    channels: list[str]
    circuit: CircuitBody
    concurrency: int
    default_for: list[str]
    delivery: str
    max_age_seconds: int
    max_attempts: int
    name: str
    operable: bool
    pace: PaceBody
    provider: str
    timeout_seconds: int
    fallback: None | str | Unset = UNSET
    paused_by_operator: None | PauseShown | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.capabilities_body import CapabilitiesBody # noqa: PLC0415
        from ..models.circuit_body import CircuitBody # noqa: PLC0415
        from ..models.pace_body import PaceBody # noqa: PLC0415
        from ..models.pause_shown import PauseShown # noqa: PLC0415
        capabilities = self.capabilities.to_dict()

        channels = self.channels



        circuit = self.circuit.to_dict()

        concurrency = self.concurrency

        default_for = self.default_for



        delivery = self.delivery

        max_age_seconds = self.max_age_seconds

        max_attempts = self.max_attempts

        name = self.name

        operable = self.operable

        pace = self.pace.to_dict()

        provider = self.provider

        timeout_seconds = self.timeout_seconds

        fallback: None | str | Unset
        if isinstance(self.fallback, Unset):
            fallback = UNSET
        else:
            fallback = self.fallback

        paused_by_operator: dict[str, Any] | None | Unset
        if isinstance(self.paused_by_operator, Unset):
            paused_by_operator = UNSET
        elif isinstance(self.paused_by_operator, PauseShown):
            paused_by_operator = self.paused_by_operator.to_dict()
        else:
            paused_by_operator = self.paused_by_operator


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "capabilities": capabilities,
            "channels": channels,
            "circuit": circuit,
            "concurrency": concurrency,
            "default_for": default_for,
            "delivery": delivery,
            "max_age_seconds": max_age_seconds,
            "max_attempts": max_attempts,
            "name": name,
            "operable": operable,
            "pace": pace,
            "provider": provider,
            "timeout_seconds": timeout_seconds,
        })
        if fallback is not UNSET:
            field_dict["fallback"] = fallback
        if paused_by_operator is not UNSET:
            field_dict["paused_by_operator"] = paused_by_operator

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.capabilities_body import CapabilitiesBody # noqa: PLC0415
        from ..models.circuit_body import CircuitBody # noqa: PLC0415
        from ..models.pace_body import PaceBody # noqa: PLC0415
        from ..models.pause_shown import PauseShown # noqa: PLC0415
        d = dict(src_dict)
        capabilities = CapabilitiesBody.from_dict(d.pop("capabilities"))




        channels = cast(list[str], d.pop("channels"))


        circuit = CircuitBody.from_dict(d.pop("circuit"))




        concurrency = d.pop("concurrency")

        default_for = cast(list[str], d.pop("default_for"))


        delivery = d.pop("delivery")

        max_age_seconds = d.pop("max_age_seconds")

        max_attempts = d.pop("max_attempts")

        name = d.pop("name")

        operable = d.pop("operable")

        pace = PaceBody.from_dict(d.pop("pace"))




        provider = d.pop("provider")

        timeout_seconds = d.pop("timeout_seconds")

        def _parse_fallback(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        fallback = _parse_fallback(d.pop("fallback", UNSET))


        def _parse_paused_by_operator(data: object) -> None | PauseShown | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                paused_by_operator_type_1 = PauseShown.from_dict(data)



                return paused_by_operator_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PauseShown | Unset, data)

        paused_by_operator = _parse_paused_by_operator(d.pop("paused_by_operator", UNSET))


        route_body = cls(
            capabilities=capabilities,
            channels=channels,
            circuit=circuit,
            concurrency=concurrency,
            default_for=default_for,
            delivery=delivery,
            max_age_seconds=max_age_seconds,
            max_attempts=max_attempts,
            name=name,
            operable=operable,
            pace=pace,
            provider=provider,
            timeout_seconds=timeout_seconds,
            fallback=fallback,
            paused_by_operator=paused_by_operator,
        )


        route_body.additional_properties = d
        return route_body

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
