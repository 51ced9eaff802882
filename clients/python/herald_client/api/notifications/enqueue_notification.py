from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.notification_body import NotificationBody
from ...models.notification_request import NotificationRequest
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    *,
    body: NotificationRequest,
    idempotency_key: str,
    traceparent: None | str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    headers["Idempotency-Key"] = idempotency_key

    if not isinstance(traceparent, Unset):
        headers["traceparent"] = traceparent



    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/notifications",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> NotificationBody | Problem | None:
    if response.status_code == 202:
        response_202 = NotificationBody.from_dict(response.json())



        return response_202

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[NotificationBody | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: NotificationRequest,
    idempotency_key: str,
    traceparent: None | str | Unset = UNSET,

) -> Response[NotificationBody | Problem]:
    """ Enqueue one notification.

    Args:
        idempotency_key (str):
        traceparent (None | str | Unset):
        body (NotificationRequest): A notification to enqueue, as the client sends it. Every field
            is checked before anything
            is stored; unknown fields are refused, so that a typo never silently drops content.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[NotificationBody | Problem]
     """


    kwargs = _get_kwargs(
        body=body,
idempotency_key=idempotency_key,
traceparent=traceparent,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    *,
    client: AuthenticatedClient,
    body: NotificationRequest,
    idempotency_key: str,
    traceparent: None | str | Unset = UNSET,

) -> NotificationBody | Problem | None:
    """ Enqueue one notification.

    Args:
        idempotency_key (str):
        traceparent (None | str | Unset):
        body (NotificationRequest): A notification to enqueue, as the client sends it. Every field
            is checked before anything
            is stored; unknown fields are refused, so that a typo never silently drops content.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        NotificationBody | Problem
     """


    return sync_detailed(
        client=client,
body=body,
idempotency_key=idempotency_key,
traceparent=traceparent,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: NotificationRequest,
    idempotency_key: str,
    traceparent: None | str | Unset = UNSET,

) -> Response[NotificationBody | Problem]:
    """ Enqueue one notification.

    Args:
        idempotency_key (str):
        traceparent (None | str | Unset):
        body (NotificationRequest): A notification to enqueue, as the client sends it. Every field
            is checked before anything
            is stored; unknown fields are refused, so that a typo never silently drops content.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[NotificationBody | Problem]
     """


    kwargs = _get_kwargs(
        body=body,
idempotency_key=idempotency_key,
traceparent=traceparent,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    *,
    client: AuthenticatedClient,
    body: NotificationRequest,
    idempotency_key: str,
    traceparent: None | str | Unset = UNSET,

) -> NotificationBody | Problem | None:
    """ Enqueue one notification.

    Args:
        idempotency_key (str):
        traceparent (None | str | Unset):
        body (NotificationRequest): A notification to enqueue, as the client sends it. Every field
            is checked before anything
            is stored; unknown fields are refused, so that a typo never silently drops content.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        NotificationBody | Problem
     """


    return (await asyncio_detailed(
        client=client,
body=body,
idempotency_key=idempotency_key,
traceparent=traceparent,

    )).parsed
