from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.bulk_body import BulkBody
from ...models.bulk_request import BulkRequest
from ...models.problem import Problem
from typing import cast



def _get_kwargs(
    *,
    body: BulkRequest,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/review/resolve",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> BulkBody | Problem | None:
    if response.status_code == 200:
        response_200 = BulkBody.from_dict(response.json())



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

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())



        return response_409

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[BulkBody | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: BulkRequest,

) -> Response[BulkBody | Problem]:
    """ Resolves many items that share one cause (a vendor outage, say), in two steps: a dry run
    shows what would change and answers a preview; the real run confirms that preview and
    changes exactly what it showed.

    Args:
        body (BulkRequest): A bulk resolution, in two steps. The dry run (`"dry_run": true`, with
            `outcome`, `then`,
            `filter`, `max`, or with `items`, each with its own outcome) shows what would change and
            answers a `preview`; the real run sends that `preview` with a `note` and changes exactly
            the
            notifications the dry run listed, with their outcomes. Anything else the real run sends
            (`outcome`, `then`, `force`, `filter`, `max`, `items`) must be what the dry run was made
            with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BulkBody | Problem]
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
    body: BulkRequest,

) -> BulkBody | Problem | None:
    """ Resolves many items that share one cause (a vendor outage, say), in two steps: a dry run
    shows what would change and answers a preview; the real run confirms that preview and
    changes exactly what it showed.

    Args:
        body (BulkRequest): A bulk resolution, in two steps. The dry run (`"dry_run": true`, with
            `outcome`, `then`,
            `filter`, `max`, or with `items`, each with its own outcome) shows what would change and
            answers a `preview`; the real run sends that `preview` with a `note` and changes exactly
            the
            notifications the dry run listed, with their outcomes. Anything else the real run sends
            (`outcome`, `then`, `force`, `filter`, `max`, `items`) must be what the dry run was made
            with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BulkBody | Problem
     """


    return sync_detailed(
        client=client,
body=body,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: BulkRequest,

) -> Response[BulkBody | Problem]:
    """ Resolves many items that share one cause (a vendor outage, say), in two steps: a dry run
    shows what would change and answers a preview; the real run confirms that preview and
    changes exactly what it showed.

    Args:
        body (BulkRequest): A bulk resolution, in two steps. The dry run (`"dry_run": true`, with
            `outcome`, `then`,
            `filter`, `max`, or with `items`, each with its own outcome) shows what would change and
            answers a `preview`; the real run sends that `preview` with a `note` and changes exactly
            the
            notifications the dry run listed, with their outcomes. Anything else the real run sends
            (`outcome`, `then`, `force`, `filter`, `max`, `items`) must be what the dry run was made
            with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BulkBody | Problem]
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
    body: BulkRequest,

) -> BulkBody | Problem | None:
    """ Resolves many items that share one cause (a vendor outage, say), in two steps: a dry run
    shows what would change and answers a preview; the real run confirms that preview and
    changes exactly what it showed.

    Args:
        body (BulkRequest): A bulk resolution, in two steps. The dry run (`"dry_run": true`, with
            `outcome`, `then`,
            `filter`, `max`, or with `items`, each with its own outcome) shows what would change and
            answers a `preview`; the real run sends that `preview` with a `note` and changes exactly
            the
            notifications the dry run listed, with their outcomes. Anything else the real run sends
            (`outcome`, `then`, `force`, `filter`, `max`, `items`) must be what the dry run was made
            with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BulkBody | Problem
     """


    return (await asyncio_detailed(
        client=client,
body=body,

    )).parsed
