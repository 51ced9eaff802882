from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.batch_body import BatchBody
from ...models.batch_request import BatchRequest
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    *,
    body: BatchRequest,
    traceparent: None | str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(traceparent, Unset):
        headers["traceparent"] = traceparent



    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/notifications/batch",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> BatchBody | Problem | None:
    if response.status_code == 200:
        response_200 = BatchBody.from_dict(response.json())



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

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())



        return response_413

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())



        return response_422

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())



        return response_429

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[BatchBody | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: BatchRequest,
    traceparent: None | str | Unset = UNSET,

) -> Response[BatchBody | Problem]:
    """ Enqueue up to 1,000 notifications in one transaction, each with its own `idempotency_key`.
    Items that fail validation are answered with their problem and store nothing; the rest
    commit together.

    Args:
        traceparent (None | str | Unset):
        body (BatchRequest): A batch of notifications to enqueue together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BatchBody | Problem]
     """


    kwargs = _get_kwargs(
        body=body,
traceparent=traceparent,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    *,
    client: AuthenticatedClient,
    body: BatchRequest,
    traceparent: None | str | Unset = UNSET,

) -> BatchBody | Problem | None:
    """ Enqueue up to 1,000 notifications in one transaction, each with its own `idempotency_key`.
    Items that fail validation are answered with their problem and store nothing; the rest
    commit together.

    Args:
        traceparent (None | str | Unset):
        body (BatchRequest): A batch of notifications to enqueue together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BatchBody | Problem
     """


    return sync_detailed(
        client=client,
body=body,
traceparent=traceparent,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: BatchRequest,
    traceparent: None | str | Unset = UNSET,

) -> Response[BatchBody | Problem]:
    """ Enqueue up to 1,000 notifications in one transaction, each with its own `idempotency_key`.
    Items that fail validation are answered with their problem and store nothing; the rest
    commit together.

    Args:
        traceparent (None | str | Unset):
        body (BatchRequest): A batch of notifications to enqueue together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BatchBody | Problem]
     """


    kwargs = _get_kwargs(
        body=body,
traceparent=traceparent,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    *,
    client: AuthenticatedClient,
    body: BatchRequest,
    traceparent: None | str | Unset = UNSET,

) -> BatchBody | Problem | None:
    """ Enqueue up to 1,000 notifications in one transaction, each with its own `idempotency_key`.
    Items that fail validation are answered with their problem and store nothing; the rest
    commit together.

    Args:
        traceparent (None | str | Unset):
        body (BatchRequest): A batch of notifications to enqueue together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BatchBody | Problem
     """


    return (await asyncio_detailed(
        client=client,
body=body,
traceparent=traceparent,

    )).parsed
