"""The PXP delivery the benchmarks and chaos runs send: a ~600-byte transaction event carrying its request id,
signed as PXP signs (base64 HMAC-SHA256 of X-Request-Id + X-Signature-Timestamp + body). Shared by
bench-pool.py and chaos-load.py; bench-ingest.lua builds the same body from BODY_PREFIX/BODY_SUFFIX."""
import base64
import hashlib
import hmac

BODY_PREFIX = (
    '{"eventCategory":"Transaction","eventCode":"transaction-authorised","eventDate":"2026-11-29T10:15:04.826Z",'
    '"eventOwner":{"merchantGroup":"MG-BENCH","merchant":"MERCHANT-1","site":"SITE-1"},'
    '"eventData":{"transactionData":{"merchantTransactionId":"'
)
BODY_SUFFIX = (
    '","merchantTransactionDate":"2026-11-29T10:15:03.000Z","systemTransactionId":"6f1c2a9e-3b1d-4c55-9a0e-0b7c1e2d3f4a",'
    '"state":"Authorised","approvalCode":"123456","transactionMethod":{"intent":"Authorisation","entryType":"Ecom",'
    '"fundingType":"Card"},"amounts":{"currencyCode":"EUR","transactionValue":125.50},"fundingData":{"providerResponse":'
    '{"code":"00","authorisedAmount":125.50}}}}}'
)


def body(request_id: str) -> bytes:
    return (BODY_PREFIX + request_id + BODY_SUFFIX).encode()


def signature(key: str, request_id: str, timestamp: str, payload: bytes) -> str:
    mac = hmac.new(key.encode(), request_id.encode() + timestamp.encode() + payload, hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()
