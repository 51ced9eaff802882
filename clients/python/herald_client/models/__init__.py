""" Contains all the data models used in inputs/outputs """

from .attachment import Attachment
from .attempt import Attempt
from .attempt_result import AttemptResult
from .batch_body import BatchBody
from .batch_request import BatchRequest
from .batch_request_items_item import BatchRequestItemsItem
from .batch_request_items_item_blocks_type_0_item import BatchRequestItemsItemBlocksType0Item
from .batch_request_items_item_data_type_0 import BatchRequestItemsItemDataType0
from .batch_request_items_item_headers_type_0 import BatchRequestItemsItemHeadersType0
from .batch_request_items_item_metadata_type_0 import BatchRequestItemsItemMetadataType0
from .batch_request_items_item_payload_type_0 import BatchRequestItemsItemPayloadType0
from .batch_request_items_item_tags_type_0 import BatchRequestItemsItemTagsType0
from .batch_result import BatchResult
from .bulk_body import BulkBody
from .bulk_item import BulkItem
from .bulk_item_channel import BulkItemChannel
from .bulk_list_item import BulkListItem
from .bulk_refusal import BulkRefusal
from .bulk_request import BulkRequest
from .callback_receipt import CallbackReceipt
from .cancel_by_key import CancelByKey
from .cancelled_by_key import CancelledByKey
from .capabilities_body import CapabilitiesBody
from .certainty import Certainty
from .channel import Channel
from .circuit_body import CircuitBody
from .cloud_event_body import CloudEventBody
from .cloud_event_body_data_type_0 import CloudEventBodyDataType0
from .content import Content
from .content_blocks_type_0_item import ContentBlocksType0Item
from .content_data_type_0 import ContentDataType0
from .content_payload_type_0 import ContentPayloadType0
from .contradiction import Contradiction
from .delivery import Delivery
from .email_options import EmailOptions
from .email_options_headers import EmailOptionsHeaders
from .email_options_tags import EmailOptionsTags
from .event_receipt import EventReceipt
from .evidence import Evidence
from .evidence_late_result import EvidenceLateResult
from .evidence_look_up import EvidenceLookUp
from .evidence_look_up_findings import EvidenceLookUpFindings
from .evidence_settlement import EvidenceSettlement
from .evidence_settlement_evidence import EvidenceSettlementEvidence
from .evidence_settlement_outcome import EvidenceSettlementOutcome
from .filter_ import Filter
from .health import Health
from .lift_body import LiftBody
from .list_body import ListBody
from .new_attachment import NewAttachment
from .new_suppression_body import NewSuppressionBody
from .new_suppression_body_channel import NewSuppressionBodyChannel
from .not_cancelled import NotCancelled
from .notification import Notification
from .notification_body import NotificationBody
from .notification_metadata import NotificationMetadata
from .notification_request import NotificationRequest
from .notification_request_blocks_type_0_item import NotificationRequestBlocksType0Item
from .notification_request_data_type_0 import NotificationRequestDataType0
from .notification_request_headers_type_0 import NotificationRequestHeadersType0
from .notification_request_metadata_type_0 import NotificationRequestMetadataType0
from .notification_request_payload_type_0 import NotificationRequestPayloadType0
from .notification_request_tags_type_0 import NotificationRequestTagsType0
from .one_click import OneClick
from .outcome import Outcome
from .pace_body import PaceBody
from .pause_body import PauseBody
from .pause_shown import PauseShown
from .problem import Problem
from .reason import Reason
from .receipt import Receipt
from .receipt_body import ReceiptBody
from .receipt_status import ReceiptStatus
from .requery_body import RequeryBody
from .resolution import Resolution
from .resolve_request import ResolveRequest
from .resume_body import ResumeBody
from .review_body import ReviewBody
from .review_item import ReviewItem
from .review_page import ReviewPage
from .route_body import RouteBody
from .routes_body import RoutesBody
from .settled_by import SettledBy
from .state import State
from .suppression import Suppression
from .suppression_evidence import SuppressionEvidence
from .suppression_page import SuppressionPage
from .suppression_reason import SuppressionReason
from .then import Then

__all__ = (
    "Attachment",
    "Attempt",
    "AttemptResult",
    "BatchBody",
    "BatchRequest",
    "BatchRequestItemsItem",
    "BatchRequestItemsItemBlocksType0Item",
    "BatchRequestItemsItemDataType0",
    "BatchRequestItemsItemHeadersType0",
    "BatchRequestItemsItemMetadataType0",
    "BatchRequestItemsItemPayloadType0",
    "BatchRequestItemsItemTagsType0",
    "BatchResult",
    "BulkBody",
    "BulkItem",
    "BulkItemChannel",
    "BulkListItem",
    "BulkRefusal",
    "BulkRequest",
    "CallbackReceipt",
    "CancelByKey",
    "CancelledByKey",
    "CapabilitiesBody",
    "Certainty",
    "Channel",
    "CircuitBody",
    "CloudEventBody",
    "CloudEventBodyDataType0",
    "Content",
    "ContentBlocksType0Item",
    "ContentDataType0",
    "ContentPayloadType0",
    "Contradiction",
    "Delivery",
    "EmailOptions",
    "EmailOptionsHeaders",
    "EmailOptionsTags",
    "EventReceipt",
    "Evidence",
    "EvidenceLateResult",
    "EvidenceLookUp",
    "EvidenceLookUpFindings",
    "EvidenceSettlement",
    "EvidenceSettlementEvidence",
    "EvidenceSettlementOutcome",
    "Filter",
    "Health",
    "LiftBody",
    "ListBody",
    "NewAttachment",
    "NewSuppressionBody",
    "NewSuppressionBodyChannel",
    "NotCancelled",
    "Notification",
    "NotificationBody",
    "NotificationMetadata",
    "NotificationRequest",
    "NotificationRequestBlocksType0Item",
    "NotificationRequestDataType0",
    "NotificationRequestHeadersType0",
    "NotificationRequestMetadataType0",
    "NotificationRequestPayloadType0",
    "NotificationRequestTagsType0",
    "OneClick",
    "Outcome",
    "PaceBody",
    "PauseBody",
    "PauseShown",
    "Problem",
    "Reason",
    "Receipt",
    "ReceiptBody",
    "ReceiptStatus",
    "RequeryBody",
    "Resolution",
    "ResolveRequest",
    "ResumeBody",
    "ReviewBody",
    "ReviewItem",
    "ReviewPage",
    "RouteBody",
    "RoutesBody",
    "SettledBy",
    "State",
    "Suppression",
    "SuppressionEvidence",
    "SuppressionPage",
    "SuppressionReason",
    "Then",
)
