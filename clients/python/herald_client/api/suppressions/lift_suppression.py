from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.channel import Channel
from ...models.lift_body import LiftBody
from ...models.problem import Problem
from ...models.suppression import Suppression
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    channel: Channel,
    recipient: str,
    *,
    body: LiftBody,
    category: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    params: dict[str, Any] = {}

    params["category"] = category


    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}


    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/suppressions/{channel}/{recipient}".format(channel=quote(str(channel), safe=""),recipient=quote(str(recipient), safe=""),),
        "params": params,
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | Suppression | None:
    if response.status_code == 200:
        response_200 = Suppression.from_dict(response.json())



        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())



        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())



        return response_404

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())



        return response_413

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())



        return response_422

    if response.status_code == 500:
        response_500 = Problem.from_dict(response.json())



        return response_500

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())



        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | Suppression]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    channel: Channel,
    recipient: str,
    *,
    client: AuthenticatedClient,
    body: LiftBody,
    category: str | Unset = UNSET,

) -> Response[Problem | Suppression]:
    """ Lift a suppression; the audit trail keeps who lifted it, when and why.

    Args:
        channel (Channel): The kind of message, and so of recipient.
        recipient (str):
        category (str | Unset):
        body (LiftBody): `DELETE /v1/suppressions/{channel}/{recipient}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Suppression]
     """


    kwargs = _get_kwargs(
        channel=channel,
recipient=recipient,
body=body,
category=category,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    channel: Channel,
    recipient: str,
    *,
    client: AuthenticatedClient,
    body: LiftBody,
    category: str | Unset = UNSET,

) -> Problem | Suppression | None:
    """ Lift a suppression; the audit trail keeps who lifted it, when and why.

    Args:
        channel (Channel): The kind of message, and so of recipient.
        recipient (str):
        category (str | Unset):
        body (LiftBody): `DELETE /v1/suppressions/{channel}/{recipient}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Suppression
     """


    return sync_detailed(
        channel=channel,
recipient=recipient,
client=client,
body=body,
category=category,

    ).parsed

async def asyncio_detailed(
    channel: Channel,
    recipient: str,
    *,
    client: AuthenticatedClient,
    body: LiftBody,
    category: str | Unset = UNSET,

) -> Response[Problem | Suppression]:
    """ Lift a suppression; the audit trail keeps who lifted it, when and why.

    Args:
        channel (Channel): The kind of message, and so of recipient.
        recipient (str):
        category (str | Unset):
        body (LiftBody): `DELETE /v1/suppressions/{channel}/{recipient}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Suppression]
     """


    kwargs = _get_kwargs(
        channel=channel,
recipient=recipient,
body=body,
category=category,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    channel: Channel,
    recipient: str,
    *,
    client: AuthenticatedClient,
    body: LiftBody,
    category: str | Unset = UNSET,

) -> Problem | Suppression | None:
    """ Lift a suppression; the audit trail keeps who lifted it, when and why.

    Args:
        channel (Channel): The kind of message, and so of recipient.
        recipient (str):
        category (str | Unset):
        body (LiftBody): `DELETE /v1/suppressions/{channel}/{recipient}`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Suppression
     """


    return (await asyncio_detailed(
        channel=channel,
recipient=recipient,
client=client,
body=body,
category=category,

    )).parsed
