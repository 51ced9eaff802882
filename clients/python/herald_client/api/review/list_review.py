from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.review_page import ReviewPage
from ...types import UNSET, Unset
from typing import cast
from uuid import UUID



def _get_kwargs(
    *,
    route: str | Unset = UNSET,
    reason: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> dict[str, Any]:
    

    

    params: dict[str, Any] = {}

    params["route"] = route

    params["reason"] = reason

    params["since"] = since

    params["until"] = until

    params["limit"] = limit

    json_cursor: str | Unset = UNSET
    if not isinstance(cursor, Unset):
        json_cursor = str(cursor)
    params["cursor"] = json_cursor


    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}


    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/review",
        "params": params,
    }


    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | ReviewPage | None:
    if response.status_code == 200:
        response_200 = ReviewPage.from_dict(response.json())



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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | ReviewPage]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    route: str | Unset = UNSET,
    reason: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> Response[Problem | ReviewPage]:
    """ What needs a person, oldest first: by default everything that waits for one (`unknown`,
    unacknowledged `duplicate_possible`, `exhausted` dead letters); permanent refusals with
    `reason=rejected`.

    Args:
        route (str | Unset):
        reason (str | Unset):
        since (str | Unset):
        until (str | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ReviewPage]
     """


    kwargs = _get_kwargs(
        route=route,
reason=reason,
since=since,
until=until,
limit=limit,
cursor=cursor,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    *,
    client: AuthenticatedClient,
    route: str | Unset = UNSET,
    reason: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> Problem | ReviewPage | None:
    """ What needs a person, oldest first: by default everything that waits for one (`unknown`,
    unacknowledged `duplicate_possible`, `exhausted` dead letters); permanent refusals with
    `reason=rejected`.

    Args:
        route (str | Unset):
        reason (str | Unset):
        since (str | Unset):
        until (str | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ReviewPage
     """


    return sync_detailed(
        client=client,
route=route,
reason=reason,
since=since,
until=until,
limit=limit,
cursor=cursor,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    route: str | Unset = UNSET,
    reason: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> Response[Problem | ReviewPage]:
    """ What needs a person, oldest first: by default everything that waits for one (`unknown`,
    unacknowledged `duplicate_possible`, `exhausted` dead letters); permanent refusals with
    `reason=rejected`.

    Args:
        route (str | Unset):
        reason (str | Unset):
        since (str | Unset):
        until (str | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ReviewPage]
     """


    kwargs = _get_kwargs(
        route=route,
reason=reason,
since=since,
until=until,
limit=limit,
cursor=cursor,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    *,
    client: AuthenticatedClient,
    route: str | Unset = UNSET,
    reason: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> Problem | ReviewPage | None:
    """ What needs a person, oldest first: by default everything that waits for one (`unknown`,
    unacknowledged `duplicate_possible`, `exhausted` dead letters); permanent refusals with
    `reason=rejected`.

    Args:
        route (str | Unset):
        reason (str | Unset):
        since (str | Unset):
        until (str | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ReviewPage
     """


    return (await asyncio_detailed(
        client=client,
route=route,
reason=reason,
since=since,
until=until,
limit=limit,
cursor=cursor,

    )).parsed
