"""Framing and headers of the Kafka wire protocol, and the table of APIs this broker serves.

A request frame is ``size:int32`` then the request header, then the body (Kafka's
``RequestHeader`` v1, or v2 with tagged fields when the request version is flexible);
a response frame is ``size:int32``, ``correlation_id:int32`` (plus an empty tagged-field
byte for flexible versions, except ApiVersions whose response header is always v0), then
the body. Bodies are decoded and encoded with kafka-python's generic schema classes
(``kafka.protocol``, Kafka's JSON message schemas); the header is parsed here from a
memoryview because ``decode(header=True)`` copies the payload.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, NamedTuple

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from seglog.broker.protocol.reader import WireReader
from seglog.errors import ProtocolError

__all__ = [
    "APIS",
    "API_VERSIONS_KEY",
    "FETCH_KEY",
    "PRODUCE_FRAME_MIN_VERSION",
    "PRODUCE_KEY",
    "ApiSpec",
    "RequestHeader",
    "api_versions_body",
    "encode_response",
    "parse_request_header",
]

API_VERSIONS_KEY = 18
PRODUCE_KEY = 0
FETCH_KEY = 1
PRODUCE_FRAME_MIN_VERSION = 3  # from here on Produce is parsed in place (_produce_wire)

_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


@dataclasses.dataclass(frozen=True)
class ApiSpec:
    """One API: its schema classes and the versions served.

    ``min_version``..``max_version`` are advertised in ApiVersions (each tested with real
    clients or raw requests); ``min_accepted`` may be lower when an older version must be
    answered with an error instead of a closed connection (Produce v0-2 from clients pinned
    to an old ``api_version``)."""

    key: int
    name: str
    request: Any
    response: Any
    min_version: int
    max_version: int
    min_accepted: int

    def accepts(self, version: int) -> bool:
        """Whether a request of ``version`` is decoded and answered."""
        return self.min_accepted <= version <= self.max_version


def _spec(request: Any, response: Any, lo: int, hi: int, accepted: int | None = None) -> ApiSpec:
    return ApiSpec(
        request.API_KEY,
        request.name,
        request,
        response,
        lo,
        hi,
        lo if accepted is None else accepted,
    )


APIS: dict[int, ApiSpec] = {
    s.key: s
    for s in (
        _spec(ProduceRequest, ProduceResponse, 3, 12, accepted=0),
        _spec(FetchRequest, FetchResponse, 4, 16),
        _spec(ListOffsetsRequest, ListOffsetsResponse, 1, 11),
        _spec(MetadataRequest, MetadataResponse, 0, 13),
        _spec(OffsetCommitRequest, OffsetCommitResponse, 2, 9),
        _spec(OffsetFetchRequest, OffsetFetchResponse, 1, 9),
        _spec(FindCoordinatorRequest, FindCoordinatorResponse, 0, 6),
        _spec(ApiVersionsRequest, ApiVersionsResponse, 0, 4),
        _spec(CreateTopicsRequest, CreateTopicsResponse, 2, 7),
        _spec(DeleteTopicsRequest, DeleteTopicsResponse, 1, 6),
        _spec(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
        _spec(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
        _spec(InitProducerIdRequest, InitProducerIdResponse, 0, 5),
        _spec(DescribeConfigsRequest, DescribeConfigsResponse, 0, 4),
        _spec(AlterConfigsRequest, AlterConfigsResponse, 0, 2),
        _spec(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
        _spec(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2),
        _spec(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0),
        _spec(DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 5),
        _spec(DescribeClusterRequest, DescribeClusterResponse, 0, 2),
        _spec(DescribeQuorumRequest, DescribeQuorumResponse, 0, 2),
        _spec(DescribeAclsRequest, DescribeAclsResponse, 1, 3),
        _spec(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4),
        _spec(DescribeProducersRequest, DescribeProducersResponse, 0, 0),
        _spec(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0),
        _spec(ElectLeadersRequest, ElectLeadersResponse, 0, 2),
        _spec(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, 0, 0),
        _spec(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, 0, 0),
        _spec(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, 0, 0),
        _spec(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, 0, 0),
        _spec(CreateAclsRequest, CreateAclsResponse, 1, 3),
        _spec(DeleteAclsRequest, DeleteAclsResponse, 1, 3),
        # SASL. SaslHandshake v0 is advertised because librdkafka before 2.x derives its
        # "SASL handshake" feature from v0 (kcat); the exchange itself must then go through
        # SaslAuthenticate (raw v0 tokens are not frames: such a client is disconnected)
        _spec(SaslHandshakeRequest, SaslHandshakeResponse, 0, 1),
        _spec(SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2),
        # consumer-group membership (_group_apis)
        _spec(JoinGroupRequest, JoinGroupResponse, 0, 9),
        _spec(HeartbeatRequest, HeartbeatResponse, 0, 4),
        _spec(LeaveGroupRequest, LeaveGroupResponse, 0, 5),
        _spec(SyncGroupRequest, SyncGroupResponse, 0, 5),
        _spec(DescribeGroupsRequest, DescribeGroupsResponse, 0, 5),
        _spec(ListGroupsRequest, ListGroupsResponse, 0, 5),
    )
}


class RequestHeader(NamedTuple):
    """Kafka ``RequestHeader`` v1/v2; ``body_offset`` is where the body starts in the frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def _flexible_request(api_key: int, api_version: int) -> bool:
    spec = APIS.get(api_key)
    if spec is None:
        return False
    if api_key == API_VERSIONS_KEY and api_version > spec.request.max_version:
        return True  # KIP-511: a newer ApiVersions than we know is flexible
    return bool(spec.request.flexible_version_q(api_version))


def parse_request_header(frame: memoryview) -> RequestHeader:
    """Parse the request header at the start of ``frame`` (the payload after the size).

    Raises ``ProtocolError`` when the frame is too short or the client id is malformed."""
    if len(frame) < _HEADER.size:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEADER.unpack_from(frame, 0)
    pos = _HEADER.size
    client_id: str | None = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise ProtocolError("truncated client id in request header")
        try:
            client_id = bytes(frame[pos : pos + client_len]).decode()
        except UnicodeDecodeError as exc:
            raise ProtocolError("client id is not UTF-8") from exc
        pos += client_len
    elif client_len != -1:
        raise ProtocolError(f"bad client id length {client_len}")
    if _flexible_request(api_key, api_version):
        reader = WireReader(frame, pos, True, "request header")
        reader.tagged_fields()
        pos = reader.pos
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytearray:
    """Frame ``body`` (a versioned kafka-python response instance) for the wire in one
    buffer: size, response header (v1 for flexible versions; ApiVersions' class forces v0),
    body. Encoding without ``version=`` avoids kafka-python's response-header bug."""
    del api_key, version  # the versioned class carries both
    body.with_header(correlation_id=correlation_id)
    encoded: bytearray = body.encode(header=True, framed=True)
    return encoded


def api_versions_body(version: int, error_code: int = 0) -> Any:
    """The ApiVersions response body listing every served API and its advertised range."""
    resp = ApiVersionsResponse[version]
    keys = [
        ApiVersionsResponse.ApiVersion(
            api_key=s.key, min_version=s.min_version, max_version=s.max_version
        )
        for s in APIS.values()
    ]
    return resp(error_code=error_code, api_keys=keys, throttle_time_ms=0)
