"""The google.rpc.Status details of a refused call: its ErrorInfo and the BadRequest field violations."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


def violations(exc: grpc.aio.AioRpcError) -> list[tuple[str, str]]:
    """The (field, description) of each BadRequest field violation the status carries; [] without one."""
    status = rpc_status.from_call(exc)
    assert status is not None, "every toolhost error carries a google.rpc.Status"
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            return [(v.field, v.description) for v in bad.field_violations]
    return []


def error_details(exc: grpc.aio.AioRpcError) -> tuple[error_details_pb2.ErrorInfo, list[tuple[str, str]]]:
    """The ErrorInfo (of the toolhost domain) and the field violations the status carries."""
    status = rpc_status.from_call(exc)
    assert status is not None, "every toolhost error carries a google.rpc.Status"
    info = error_details_pb2.ErrorInfo()
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            detail.Unpack(info)
    assert info.domain == "toolhost"
    return info, violations(exc)
