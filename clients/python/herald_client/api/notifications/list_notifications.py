from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.certainty import Certainty
from ...models.channel import Channel
from ...models.list_body import ListBody
from ...models.problem import Problem
from ...models.state import State
from ...types import UNSET, Unset
from typing import cast
from uuid import UUID
import datetime



def _get_kwargs(
    *,
    state: State | Unset = UNSET,
    certainty: Certainty | Unset = UNSET,
    channel: Channel | Unset = UNSET,
    route: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> dict[str, Any]:
    

    

    params: dict[str, Any] = {}

    json_state: str | Unset = UNSET
    if not isinstance(state, Unset):
        json_state = state.value

    params["state"] = json_state

    json_certainty: str | Unset = UNSET
    if not isinstance(certainty, Unset):
        json_certainty = certainty.value

    params["certainty"] = json_certainty

    json_channel: str | Unset = UNSET
    if not isinstance(channel, Unset):
        json_channel = channel.value

    params["channel"] = json_channel

    params["route"] = route

    json_created_after: str | Unset = UNSET
    if not isinstance(created_after, Unset):
        json_created_after = created_after.isoformat()
    params["created_after"] = json_created_after

    json_created_before: str | Unset = UNSET
    if not isinstance(created_before, Unset):
        json_created_before = created_before.isoformat()
    params["created_before"] = json_created_before

    params["limit"] = limit

    json_cursor: str | Unset = UNSET
    if not isinstance(cursor, Unset):
        json_cursor = str(cursor)
    params["cursor"] = json_cursor


    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}


    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/notifications",
        "params": params,
    }


    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ListBody | Problem | None:
    if response.status_code == 200:
        response_200 = ListBody.from_dict(response.json())



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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[ListBody | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    state: State | Unset = UNSET,
    certainty: Certainty | Unset = UNSET,
    channel: Channel | Unset = UNSET,
    route: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> Response[ListBody | Problem]:
    """ Notifications, newest first, cursor-paginated, each as `GET /v1/notifications/{id}` shows
    it. Every filter given must hold.

     Metadata filters: any number of `metadata.<key>=<value>` parameters (for example
    `metadata.export=export-intent-7`); each keeps only notifications whose metadata has that key
    with exactly that value. Keys follow the rule of enqueue: 1 to 40 characters.

    Args:
        state (State | Unset): Where a notification stands. Which moves between states there are,
            and who makes
            each, is herald's transition table (docs/api.md, "Words").
        certainty (Certainty | Unset): How sure herald is about what the provider did.
        channel (Channel | Unset): The kind of message, and so of recipient.
        route (str | Unset):
        created_after (datetime.datetime | Unset):
        created_before (datetime.datetime | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ListBody | Problem]
     """


    kwargs = _get_kwargs(
        state=state,
certainty=certainty,
channel=channel,
route=route,
created_after=created_after,
created_before=created_before,
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
    state: State | Unset = UNSET,
    certainty: Certainty | Unset = UNSET,
    channel: Channel | Unset = UNSET,
    route: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> ListBody | Problem | None:
    """ Notifications, newest first, cursor-paginated, each as `GET /v1/notifications/{id}` shows
    it. Every filter given must hold.

     Metadata filters: any number of `metadata.<key>=<value>` parameters (for example
    `metadata.export=export-intent-7`); each keeps only notifications whose metadata has that key
    with exactly that value. Keys follow the rule of enqueue: 1 to 40 characters.

    Args:
        state (State | Unset): Where a notification stands. Which moves between states there are,
            and who makes
            each, is herald's transition table (docs/api.md, "Words").
        certainty (Certainty | Unset): How sure herald is about what the provider did.
        channel (Channel | Unset): The kind of message, and so of recipient.
        route (str | Unset):
        created_after (datetime.datetime | Unset):
        created_before (datetime.datetime | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ListBody | Problem
     """


    return sync_detailed(
        client=client,
state=state,
certainty=certainty,
channel=channel,
route=route,
created_after=created_after,
created_before=created_before,
limit=limit,
cursor=cursor,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    state: State | Unset = UNSET,
    certainty: Certainty | Unset = UNSET,
    channel: Channel | Unset = UNSET,
    route: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> Response[ListBody | Problem]:
    """ Notifications, newest first, cursor-paginated, each as `GET /v1/notifications/{id}` shows
    it. Every filter given must hold.

     Metadata filters: any number of `metadata.<key>=<value>` parameters (for example
    `metadata.export=export-intent-7`); each keeps only notifications whose metadata has that key
    with exactly that value. Keys follow the rule of enqueue: 1 to 40 characters.

    Args:
        state (State | Unset): Where a notification stands. Which moves between states there are,
            and who makes
            each, is herald's transition table (docs/api.md, "Words").
        certainty (Certainty | Unset): How sure herald is about what the provider did.
        channel (Channel | Unset): The kind of message, and so of recipient.
        route (str | Unset):
        created_after (datetime.datetime | Unset):
        created_before (datetime.datetime | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ListBody | Problem]
     """


    kwargs = _get_kwargs(
        state=state,
certainty=certainty,
channel=channel,
route=route,
created_after=created_after,
created_before=created_before,
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
    state: State | Unset = UNSET,
    certainty: Certainty | Unset = UNSET,
    channel: Channel | Unset = UNSET,
    route: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,

) -> ListBody | Problem | None:
    """ Notifications, newest first, cursor-paginated, each as `GET /v1/notifications/{id}` shows
    it. Every filter given must hold.

     Metadata filters: any number of `metadata.<key>=<value>` parameters (for example
    `metadata.export=export-intent-7`); each keeps only notifications whose metadata has that key
    with exactly that value. Keys follow the rule of enqueue: 1 to 40 characters.

    Args:
        state (State | Unset): Where a notification stands. Which moves between states there are,
            and who makes
            each, is herald's transition table (docs/api.md, "Words").
        certainty (Certainty | Unset): How sure herald is about what the provider did.
        channel (Channel | Unset): The kind of message, and so of recipient.
        route (str | Unset):
        created_after (datetime.datetime | Unset):
        created_before (datetime.datetime | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ListBody | Problem
     """


    return (await asyncio_detailed(
        client=client,
state=state,
certainty=certainty,
channel=channel,
route=route,
created_after=created_after,
created_before=created_before,
limit=limit,
cursor=cursor,

    )).parsed
