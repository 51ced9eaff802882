from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.cancel_by_key import CancelByKey
from ...models.cancelled_by_key import CancelledByKey
from ...models.problem import Problem
from typing import cast



def _get_kwargs(
    *,
    body: CancelByKey,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/notifications/cancel",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> CancelledByKey | Problem | None:
    if response.status_code == 200:
        response_200 = CancelledByKey.from_dict(response.json())



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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[CancelledByKey | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: CancelByKey,

) -> Response[CancelledByKey | Problem]:
    """ Cancel, in one transaction, every notification of the tenant's still `queued` under a
    `cancellation_key` (or the one enqueued under an `Idempotency-Key`), and say what became of
    the rest. A key that names none answers two empty lists.

    Args:
        body (CancelByKey): `POST /v1/notifications/cancel`: exactly one of the two keys.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CancelledByKey | Problem]
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
    body: CancelByKey,

) -> CancelledByKey | Problem | None:
    """ Cancel, in one transaction, every notification of the tenant's still `queued` under a
    `cancellation_key` (or the one enqueued under an `Idempotency-Key`), and say what became of
    the rest. A key that names none answers two empty lists.

    Args:
        body (CancelByKey): `POST /v1/notifications/cancel`: exactly one of the two keys.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CancelledByKey | Problem
     """


    return sync_detailed(
        client=client,
body=body,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: CancelByKey,

) -> Response[CancelledByKey | Problem]:
    """ Cancel, in one transaction, every notification of the tenant's still `queued` under a
    `cancellation_key` (or the one enqueued under an `Idempotency-Key`), and say what became of
    the rest. A key that names none answers two empty lists.

    Args:
        body (CancelByKey): `POST /v1/notifications/cancel`: exactly one of the two keys.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CancelledByKey | Problem]
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
    body: CancelByKey,

) -> CancelledByKey | Problem | None:
    """ Cancel, in one transaction, every notification of the tenant's still `queued` under a
    `cancellation_key` (or the one enqueued under an `Idempotency-Key`), and say what became of
    the rest. A key that names none answers two empty lists.

    Args:
        body (CancelByKey): `POST /v1/notifications/cancel`: exactly one of the two keys.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CancelledByKey | Problem
     """


    return (await asyncio_detailed(
        client=client,
body=body,

    )).parsed
