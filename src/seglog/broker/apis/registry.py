"""The ONE table of the APIs this broker serves: API key -> request and response schemas
(kafka-python's classes, built from Kafka's JSON message schemas), the versions served,
the handler, and how the dispatcher treats the request.

Every handler has one signature, ``handler(ctx, rctx, request)``: the broker's services
(:class:`~seglog.broker.context.BrokerContext`), the request's own facts
(:class:`~seglog.broker.context.RequestContext`: header, principal, listener, client,
session) and the decoded request. It returns the response body (a versioned kafka-python
response instance), a coroutine of it, or None (no response: acks=0). Flags:

- ``before_authentication``: served on a SASL listener before SaslAuthenticate succeeds
  (ApiVersions, SaslHandshake, SaslAuthenticate; anything else closes the connection);
- ``encoded``: the handler frames the response itself (Fetch: record bytes written as
  read; Produce) and returns the frame, a future or a coroutine of it;
- ``raw_from``: from this version on the handler gets the request frame undecoded
  (``memoryview``, body at ``rctx.header.body_offset``): Produce v3+ is parsed in place.

``min_version``..``max_version`` are advertised in ApiVersions (each tested with real
clients or raw requests); ``min_accepted`` may be lower when an older version must be
answered with an error instead of a closed connection (Produce v0-2 from clients pinned to
an old ``api_version``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
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
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
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
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
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
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from seglog.broker.apis.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from seglog.broker.apis.client_quotas import (
    handle_alter_client_quotas,
    handle_describe_client_quotas,
)
from seglog.broker.apis.cluster import (
    handle_alter_replica_log_dirs,
    handle_describe_cluster,
    handle_describe_log_dirs,
    handle_describe_quorum,
)
from seglog.broker.apis.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
    handle_list_config_resources,
)
from seglog.broker.apis.consumer_groups import (
    handle_consumer_group_describe,
    handle_consumer_group_heartbeat,
)
from seglog.broker.apis.delete_records import handle_delete_records
from seglog.broker.apis.end_txn import handle_end_txn, handle_write_txn_markers
from seglog.broker.apis.fetch import handle_fetch
from seglog.broker.apis.group_admin import handle_delete_groups, handle_offset_delete
from seglog.broker.apis.groups import (
    handle_describe_groups,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_sync_group,
)
from seglog.broker.apis.init_producer_id import handle_init_producer_id
from seglog.broker.apis.list_offsets import handle_list_offsets
from seglog.broker.apis.metadata import handle_find_coordinator, handle_metadata
from seglog.broker.apis.offsets import handle_offset_commit, handle_offset_fetch
from seglog.broker.apis.produce import handle_produce
from seglog.broker.apis.replica import (
    handle_alter_partition_reassignments,
    handle_describe_producers,
    handle_describe_topic_partitions,
    handle_elect_leaders,
    handle_list_partition_reassignments,
    handle_offset_for_leader_epoch,
)
from seglog.broker.apis.sasl import handle_sasl_authenticate, handle_sasl_handshake
from seglog.broker.apis.scram import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from seglog.broker.apis.share_fetch import handle_share_acknowledge, handle_share_fetch
from seglog.broker.apis.share_groups import (
    handle_alter_share_group_offsets,
    handle_delete_share_group_offsets,
    handle_describe_share_group_offsets,
    handle_share_group_describe,
    handle_share_group_heartbeat,
)
from seglog.broker.apis.topics import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from seglog.broker.apis.txn_admin import (
    handle_describe_transactions,
    handle_list_transactions,
)
from seglog.broker.apis.txn_offsets import handle_txn_offset_commit
from seglog.broker.apis.txn_partitions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
)
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol.api_keys import ApiKey
from seglog.broker.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from seglog.broker.protocol.messages.share_group import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

__all__ = [
    "REGISTRY",
    "ApiSpec",
    "Handler",
    "api_versions_body",
    "flexible_request",
    "handle_api_versions",
]

Handler = Callable[[BrokerContext, RequestContext, Any], Any]
"""``handler(ctx, rctx, request) -> response body | coroutine of it | None``."""


@dataclasses.dataclass(frozen=True)
class ApiSpec:
    """One API this broker serves (see the module docstring for the flags)."""

    key: ApiKey
    request: Any
    response: Any
    min_version: int
    max_version: int
    handler: Handler
    min_accepted: int
    before_authentication: bool = False
    encoded: bool = False
    raw_from: int | None = None

    @property
    def name(self) -> str:
        """Kafka's name of the request, e.g. ``"ProduceRequest"``."""
        return str(self.request.name)

    def accepts(self, version: int) -> bool:
        """Whether a request of ``version`` is decoded and answered."""
        return self.min_accepted <= version <= self.max_version


def _api(
    request: Any,
    response: Any,
    versions: tuple[int, int],
    handler: Handler,
    *,
    accepted: int | None = None,
    before_authentication: bool = False,
    encoded: bool = False,
    raw_from: int | None = None,
) -> ApiSpec:
    lo, hi = versions
    return ApiSpec(
        ApiKey(request.API_KEY), request, response, lo, hi, handler,
        lo if accepted is None else accepted,
        before_authentication, encoded, raw_from,
    )  # fmt: skip


def handle_api_versions(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """ApiVersions: every API of :data:`REGISTRY` with its advertised versions. (A version
    this broker does not serve is answered by the dispatcher: a v0 body with 35
    UNSUPPORTED_VERSION, KIP-511.)"""
    del ctx, req
    return api_versions_body(rctx.api_version)


REGISTRY: dict[int, ApiSpec] = {
    s.key: s
    for s in (
        _api(ProduceRequest, ProduceResponse, (3, 12), handle_produce,
             accepted=0, encoded=True, raw_from=3),
        _api(FetchRequest, FetchResponse, (4, 18), handle_fetch, encoded=True),
        _api(ListOffsetsRequest, ListOffsetsResponse, (1, 11), handle_list_offsets),
        _api(MetadataRequest, MetadataResponse, (0, 13), handle_metadata),
        _api(OffsetCommitRequest, OffsetCommitResponse, (2, 9), handle_offset_commit),
        _api(OffsetFetchRequest, OffsetFetchResponse, (1, 9), handle_offset_fetch),
        _api(FindCoordinatorRequest, FindCoordinatorResponse, (0, 6), handle_find_coordinator),
        _api(ApiVersionsRequest, ApiVersionsResponse, (0, 4), handle_api_versions,
             before_authentication=True),
        _api(CreateTopicsRequest, CreateTopicsResponse, (2, 7), handle_create_topics),
        _api(DeleteTopicsRequest, DeleteTopicsResponse, (1, 6), handle_delete_topics),
        _api(DeleteRecordsRequest, DeleteRecordsResponse, (0, 2), handle_delete_records),
        _api(CreatePartitionsRequest, CreatePartitionsResponse, (0, 3), handle_create_partitions),
        _api(InitProducerIdRequest, InitProducerIdResponse, (0, 5), handle_init_producer_id),
        _api(DescribeConfigsRequest, DescribeConfigsResponse, (0, 4), handle_describe_configs),
        _api(AlterConfigsRequest, AlterConfigsResponse, (0, 2), handle_alter_configs),
        _api(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, (0, 1),
             handle_incremental_alter_configs),
        _api(ListConfigResourcesRequest, ListConfigResourcesResponse, (0, 1),
             handle_list_config_resources),
        _api(DeleteGroupsRequest, DeleteGroupsResponse, (0, 2), handle_delete_groups),
        _api(OffsetDeleteRequest, OffsetDeleteResponse, (0, 0), handle_offset_delete),
        _api(DescribeLogDirsRequest, DescribeLogDirsResponse, (1, 5), handle_describe_log_dirs),
        _api(AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, (1, 2),
             handle_alter_replica_log_dirs),
        _api(DescribeClusterRequest, DescribeClusterResponse, (0, 2), handle_describe_cluster),
        _api(DescribeQuorumRequest, DescribeQuorumResponse, (0, 2), handle_describe_quorum),
        _api(DescribeAclsRequest, DescribeAclsResponse, (1, 3), handle_describe_acls),
        _api(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, (2, 4),
             handle_offset_for_leader_epoch),
        _api(DescribeProducersRequest, DescribeProducersResponse, (0, 0),
             handle_describe_producers),
        _api(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, (0, 0),
             handle_describe_topic_partitions),
        _api(ElectLeadersRequest, ElectLeadersResponse, (0, 2), handle_elect_leaders),
        _api(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, (0, 1),
             handle_alter_partition_reassignments),
        _api(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, (0, 0),
             handle_list_partition_reassignments),
        _api(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, (0, 0),
             handle_describe_user_scram_credentials),
        _api(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, (0, 0),
             handle_alter_user_scram_credentials),
        _api(CreateAclsRequest, CreateAclsResponse, (1, 3), handle_create_acls),
        _api(DeleteAclsRequest, DeleteAclsResponse, (1, 3), handle_delete_acls),
        # client quotas (apis/client_quotas.py; enforced by security/throttling.py)
        _api(DescribeClientQuotasRequest, DescribeClientQuotasResponse, (0, 1),
             handle_describe_client_quotas),
        _api(AlterClientQuotasRequest, AlterClientQuotasResponse, (0, 1),
             handle_alter_client_quotas),
        # SASL. SaslHandshake v0 is advertised because librdkafka before 2.x derives its
        # "SASL handshake" feature from v0 (kcat); the exchange itself must then go through
        # SaslAuthenticate (raw v0 tokens are not frames: such a client is disconnected)
        _api(SaslHandshakeRequest, SaslHandshakeResponse, (0, 1), handle_sasl_handshake,
             before_authentication=True),
        _api(SaslAuthenticateRequest, SaslAuthenticateResponse, (0, 2), handle_sasl_authenticate,
             before_authentication=True),
        # consumer-group membership (apis/groups.py)
        _api(JoinGroupRequest, JoinGroupResponse, (0, 9), handle_join_group),
        _api(HeartbeatRequest, HeartbeatResponse, (0, 4), handle_heartbeat),
        _api(LeaveGroupRequest, LeaveGroupResponse, (0, 5), handle_leave_group),
        _api(SyncGroupRequest, SyncGroupResponse, (0, 5), handle_sync_group),
        _api(DescribeGroupsRequest, DescribeGroupsResponse, (0, 6), handle_describe_groups),
        _api(ListGroupsRequest, ListGroupsResponse, (0, 5), handle_list_groups),
        # KIP-848 consumer groups (apis/consumer_groups.py)
        _api(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, (0, 1),
             handle_consumer_group_heartbeat),
        _api(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, (0, 1),
             handle_consumer_group_describe),
        # KIP-932 share groups (apis/share_groups.py, apis/share_fetch.py): v1 is the first
        # stable version of 76-79 (Kafka 4.1) and what librdkafka 2.16 sends
        _api(ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, (1, 1),
             handle_share_group_heartbeat),
        _api(ShareGroupDescribeRequest, ShareGroupDescribeResponse, (1, 1),
             handle_share_group_describe),
        _api(ShareFetchRequest, ShareFetchResponse, (1, 1), handle_share_fetch),
        _api(ShareAcknowledgeRequest, ShareAcknowledgeResponse, (1, 1), handle_share_acknowledge),
        _api(DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, (0, 0),
             handle_describe_share_group_offsets),
        _api(AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, (0, 0),
             handle_alter_share_group_offsets),
        _api(DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse, (0, 0),
             handle_delete_share_group_offsets),
        # transactions (KIP-98/447/890; coordinator/transactions.py). EndTxn and
        # TxnOffsetCommit stop at v4: v5 is KIP-890 part 2 (transaction version 2, an epoch
        # bump per transaction), which this broker does not advertise as a feature
        _api(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, (0, 5),
             handle_add_partitions_to_txn),
        _api(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, (0, 4), handle_add_offsets_to_txn),
        _api(EndTxnRequest, EndTxnResponse, (0, 4), handle_end_txn),
        _api(WriteTxnMarkersRequest, WriteTxnMarkersResponse, (0, 1), handle_write_txn_markers),
        _api(TxnOffsetCommitRequest, TxnOffsetCommitResponse, (0, 4), handle_txn_offset_commit),
        _api(DescribeTransactionsRequest, DescribeTransactionsResponse, (0, 0),
             handle_describe_transactions),
        _api(ListTransactionsRequest, ListTransactionsResponse, (0, 2), handle_list_transactions),
    )
}  # fmt: skip


def flexible_request(api_key: int, api_version: int) -> bool:
    """Whether that request's header is v2 (flexible versions, tagged fields); False for an
    API this broker does not serve."""
    spec = REGISTRY.get(api_key)
    if spec is None:
        return False
    if api_key == ApiKey.API_VERSIONS and api_version > spec.request.max_version:
        return True  # KIP-511: a newer ApiVersions than we know is flexible
    return bool(spec.request.flexible_version_q(api_version))


def api_versions_body(version: int, error_code: int = 0) -> Any:
    """The ApiVersions response body listing every served API and its advertised range."""
    resp = ApiVersionsResponse[version]
    keys = [
        ApiVersionsResponse.ApiVersion(
            api_key=s.key, min_version=s.min_version, max_version=s.max_version
        )
        for s in REGISTRY.values()
    ]
    return resp(error_code=error_code, api_keys=keys, throttle_time_ms=0)
