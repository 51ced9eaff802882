from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.callback_receipt import CallbackReceipt
from ...models.problem import Problem
from typing import cast



def _get_kwargs(
    route: str,
    *,
    body: str,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/callbacks/{route}".format(route=quote(str(route), safe=""),),
    }

    _kwargs["json"] = body

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> CallbackReceipt | Problem | None:
    if response.status_code == 200:
        response_200 = CallbackReceipt.from_dict(response.json())



        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())



        return response_404

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())



        return response_413

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())



        return response_429

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())



        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[CallbackReceipt | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    route: str,
    *,
    client: AuthenticatedClient | Client,
    body: str,

) -> Response[CallbackReceipt | Problem]:
    """ Take a vendor's delivery callback for a route.

    Args:
        route (str):
        body (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CallbackReceipt | Problem]
     """


    kwargs = _get_kwargs(
        route=route,
body=body,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    route: str,
    *,
    client: AuthenticatedClient | Client,
    body: str,

) -> CallbackReceipt | Problem | None:
    """ Take a vendor's delivery callback for a route.

    Args:
        route (str):
        body (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CallbackReceipt | Problem
     """


    return sync_detailed(
        route=route,
client=client,
body=body,

    ).parsed

async def asyncio_detailed(
    route: str,
    *,
    client: AuthenticatedClient | Client,
    body: str,

) -> Response[CallbackReceipt | Problem]:
    """ Take a vendor's delivery callback for a route.

    Args:
        route (str):
        body (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CallbackReceipt | Problem]
     """


    kwargs = _get_kwargs(
        route=route,
body=body,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    route: str,
    *,
    client: AuthenticatedClient | Client,
    body: str,

) -> CallbackReceipt | Problem | None:
    """ Take a vendor's delivery callback for a route.

    Args:
        route (str):
        body (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CallbackReceipt | Problem
     """


    return (await asyncio_detailed(
        route=route,
client=client,
body=body,

    )).parsed
