from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.new_suppression_body import NewSuppressionBody
from ...models.problem import Problem
from ...models.suppression import Suppression
from typing import cast



def _get_kwargs(
    *,
    body: NewSuppressionBody,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/suppressions",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | Suppression | None:
    if response.status_code == 200:
        response_200 = Suppression.from_dict(response.json())



        return response_200

    if response.status_code == 201:
        response_201 = Suppression.from_dict(response.json())



        return response_201

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())



        return response_403

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
    *,
    client: AuthenticatedClient,
    body: NewSuppressionBody,

) -> Response[Problem | Suppression]:
    """ Suppress a recipient on a channel for the tenant: its notifications then fail `known`,
    reason `suppressed`, without a vendor call.

    Args:
        body (NewSuppressionBody): `POST /v1/suppressions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Suppression]
     """


    kwargs = _get_kwargs(
        body=body,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    *,
    client: AuthenticatedClient,
    body: NewSuppressionBody,

) -> Problem | Suppression | None:
    """ Suppress a recipient on a channel for the tenant: its notifications then fail `known`,
    reason `suppressed`, without a vendor call.

    Args:
        body (NewSuppressionBody): `POST /v1/suppressions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Suppression
     """


    return sync_detailed(
        client=client,
body=body,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: NewSuppressionBody,

) -> Response[Problem | Suppression]:
    """ Suppress a recipient on a channel for the tenant: its notifications then fail `known`,
    reason `suppressed`, without a vendor call.

    Args:
        body (NewSuppressionBody): `POST /v1/suppressions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Suppression]
     """


    kwargs = _get_kwargs(
        body=body,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    *,
    client: AuthenticatedClient,
    body: NewSuppressionBody,

) -> Problem | Suppression | None:
    """ Suppress a recipient on a channel for the tenant: its notifications then fail `known`,
    reason `suppressed`, without a vendor call.

    Args:
        body (NewSuppressionBody): `POST /v1/suppressions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Suppression
     """


    return (await asyncio_detailed(
        client=client,
body=body,

    )).parsed
