"""toolhost.v1.AssetService over grpc.aio: requests to the asset inventory (which checks the rights and the
values), records to responses, errors to status.

A caller without the manage_assets right is refused before anything else of its request is read (an unknown
enum, a bad mask): the servicer then hands the core only the name the refusal's audit entry needs, and the core,
which checks the right first and audits each refused change, refuses.
"""

from __future__ import annotations

import grpc

from toolhost.v1 import asset_service_pb2 as pb
from toolhost.v1 import asset_service_pb2_grpc

from ..app import Toolhost
from ..assets.model import Asset
from ..assets.service import AssetInventory
from ..auth import Caller
from ..auth.rights import Right
from .asset_messages import (
    asset_filter,
    asset_message,
    asset_record,
    import_format,
    update_paths,
)
from .authentication import authenticate
from .message_pages import page_bytes, page_within
from .rights import requires
from .status import translate_errors

ASSET_SERVICE_NAME = pb.DESCRIPTOR.services_by_name["AssetService"].full_name


class AssetService(asset_service_pb2_grpc.AssetServiceServicer):
    def __init__(self, toolhost: Toolhost) -> None:
        self._toolhost = toolhost

    def _caller(self, context: grpc.aio.ServicerContext) -> Caller:
        return authenticate(self._toolhost.authenticator, context, self._toolhost.config.trusted_unix_socket)

    @property
    def _assets(self) -> AssetInventory:
        return self._toolhost.assets

    @requires(Right.MANAGE_ASSETS)
    @translate_errors
    async def CreateAsset(
        self, request: pb.CreateAssetRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateAssetResponse:
        caller = self._caller(context)
        asset = asset_record(request.asset) if _manages(caller) else Asset(request.asset.name)
        created = await self._assets.create(caller, asset)
        return pb.CreateAssetResponse(asset=asset_message(created))

    @requires(Right.MANAGE_ASSETS)
    @translate_errors
    async def GetAsset(self, request: pb.GetAssetRequest, context: grpc.aio.ServicerContext) -> pb.GetAssetResponse:
        caller = self._caller(context)
        asset = await self._assets.get(caller, request.name)
        return pb.GetAssetResponse(asset=asset_message(asset))

    @requires(Right.MANAGE_ASSETS)
    @translate_errors
    async def ListAssets(
        self, request: pb.ListAssetsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListAssetsResponse:
        caller = self._caller(context)
        where = asset_filter(request.filter)
        budget = page_bytes(self._toolhost.config.max_message_bytes)
        page = await self._assets.list(caller, where, request.page_size, request.page_token)
        messages = [asset_message(asset) for asset in page.assets]
        fitting = page_within(messages, budget)
        while fitting < len(messages):
            # Cut short to stay under the message limit: asked again for just the assets that fit, the core
            # gives the token that continues after the last of them (re-read: they may have changed).
            page = await self._assets.list(caller, where, fitting, request.page_token)
            messages = [asset_message(asset) for asset in page.assets]
            fitting = page_within(messages, budget)
        return pb.ListAssetsResponse(assets=messages, next_page_token=page.next_page_token,
                                     total_size=page.total_size)

    @requires(Right.MANAGE_ASSETS)
    @translate_errors
    async def UpdateAsset(
        self, request: pb.UpdateAssetRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateAssetResponse:
        caller = self._caller(context)
        if _manages(caller):
            paths, values = update_paths(request.asset, request.update_mask.paths), asset_record(request.asset)
        else:
            paths, values = (), Asset(request.asset.name)
        updated = await self._assets.update(caller, request.asset.name, paths, values)
        return pb.UpdateAssetResponse(asset=asset_message(updated))

    @requires(Right.MANAGE_ASSETS)
    @translate_errors
    async def DeleteAsset(
        self, request: pb.DeleteAssetRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteAssetResponse:
        caller = self._caller(context)
        deleted = await self._assets.delete(caller, request.name)
        return pb.DeleteAssetResponse(asset=asset_message(deleted))

    @requires(Right.MANAGE_ASSETS)
    @translate_errors
    async def ImportAssets(
        self, request: pb.ImportAssetsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ImportAssetsResponse:
        caller = self._caller(context)
        summary = await self._assets.import_assets(caller, import_format(request.format), request.content,
                                                   request.validate_only)
        return pb.ImportAssetsResponse(created=summary.created, replaced=summary.replaced)


def _manages(caller: Caller) -> bool:
    return caller.permissions.may_manage_assets
