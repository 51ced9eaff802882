from enum import StrEnum

class State(StrEnum):
    CANCELLED = "cancelled"
    DELIVERED = "delivered"
    FAILED = "failed"
    QUEUED = "queued"
    SENDING = "sending"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return str(self.value)
