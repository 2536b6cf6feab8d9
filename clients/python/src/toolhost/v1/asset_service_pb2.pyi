import datetime

from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WinrmAuthentication(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WINRM_AUTHENTICATION_UNSPECIFIED: _ClassVar[WinrmAuthentication]
    WINRM_AUTHENTICATION_NTLM: _ClassVar[WinrmAuthentication]
    WINRM_AUTHENTICATION_BASIC: _ClassVar[WinrmAuthentication]

class AssetImportFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ASSET_IMPORT_FORMAT_UNSPECIFIED: _ClassVar[AssetImportFormat]
    ASSET_IMPORT_FORMAT_YAML: _ClassVar[AssetImportFormat]
    ASSET_IMPORT_FORMAT_CSV: _ClassVar[AssetImportFormat]
WINRM_AUTHENTICATION_UNSPECIFIED: WinrmAuthentication
WINRM_AUTHENTICATION_NTLM: WinrmAuthentication
WINRM_AUTHENTICATION_BASIC: WinrmAuthentication
ASSET_IMPORT_FORMAT_UNSPECIFIED: AssetImportFormat
ASSET_IMPORT_FORMAT_YAML: AssetImportFormat
ASSET_IMPORT_FORMAT_CSV: AssetImportFormat

class Asset(_message.Message):
    __slots__ = ("name", "hostname", "addresses", "os", "platform", "site", "tags", "winrm", "create_time", "update_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    WINRM_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    hostname: str
    addresses: _containers.RepeatedScalarFieldContainer[str]
    os: str
    platform: str
    site: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    winrm: WinrmProfile
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., hostname: _Optional[str] = ..., addresses: _Optional[_Iterable[str]] = ..., os: _Optional[str] = ..., platform: _Optional[str] = ..., site: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., winrm: _Optional[_Union[WinrmProfile, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WinrmProfile(_message.Message):
    __slots__ = ("port", "ssl", "domain", "credential", "authentication")
    PORT_FIELD_NUMBER: _ClassVar[int]
    SSL_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATION_FIELD_NUMBER: _ClassVar[int]
    port: int
    ssl: bool
    domain: str
    credential: str
    authentication: WinrmAuthentication
    def __init__(self, port: _Optional[int] = ..., ssl: _Optional[bool] = ..., domain: _Optional[str] = ..., credential: _Optional[str] = ..., authentication: _Optional[_Union[WinrmAuthentication, str]] = ...) -> None: ...

class AssetFilter(_message.Message):
    __slots__ = ("os", "platform", "site", "tag", "name")
    OS_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    os: str
    platform: str
    site: str
    tag: str
    name: str
    def __init__(self, os: _Optional[str] = ..., platform: _Optional[str] = ..., site: _Optional[str] = ..., tag: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class CreateAssetRequest(_message.Message):
    __slots__ = ("asset",)
    ASSET_FIELD_NUMBER: _ClassVar[int]
    asset: Asset
    def __init__(self, asset: _Optional[_Union[Asset, _Mapping]] = ...) -> None: ...

class CreateAssetResponse(_message.Message):
    __slots__ = ("asset",)
    ASSET_FIELD_NUMBER: _ClassVar[int]
    asset: Asset
    def __init__(self, asset: _Optional[_Union[Asset, _Mapping]] = ...) -> None: ...

class GetAssetRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetAssetResponse(_message.Message):
    __slots__ = ("asset",)
    ASSET_FIELD_NUMBER: _ClassVar[int]
    asset: Asset
    def __init__(self, asset: _Optional[_Union[Asset, _Mapping]] = ...) -> None: ...

class ListAssetsRequest(_message.Message):
    __slots__ = ("filter", "page_size", "page_token")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    filter: AssetFilter
    page_size: int
    page_token: str
    def __init__(self, filter: _Optional[_Union[AssetFilter, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAssetsResponse(_message.Message):
    __slots__ = ("assets", "next_page_token", "total_size")
    ASSETS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    assets: _containers.RepeatedCompositeFieldContainer[Asset]
    next_page_token: str
    total_size: int
    def __init__(self, assets: _Optional[_Iterable[_Union[Asset, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class UpdateAssetRequest(_message.Message):
    __slots__ = ("asset", "update_mask")
    ASSET_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    asset: Asset
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, asset: _Optional[_Union[Asset, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateAssetResponse(_message.Message):
    __slots__ = ("asset",)
    ASSET_FIELD_NUMBER: _ClassVar[int]
    asset: Asset
    def __init__(self, asset: _Optional[_Union[Asset, _Mapping]] = ...) -> None: ...

class DeleteAssetRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteAssetResponse(_message.Message):
    __slots__ = ("asset",)
    ASSET_FIELD_NUMBER: _ClassVar[int]
    asset: Asset
    def __init__(self, asset: _Optional[_Union[Asset, _Mapping]] = ...) -> None: ...

class ImportAssetsRequest(_message.Message):
    __slots__ = ("format", "content", "validate_only")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    format: AssetImportFormat
    content: str
    validate_only: bool
    def __init__(self, format: _Optional[_Union[AssetImportFormat, str]] = ..., content: _Optional[str] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class ImportAssetsResponse(_message.Message):
    __slots__ = ("created", "replaced")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    created: int
    replaced: int
    def __init__(self, created: _Optional[int] = ..., replaced: _Optional[int] = ...) -> None: ...
