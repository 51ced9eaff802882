from enum import StrEnum

class ReceiptStatus(StrEnum):
    BOUNCED = "bounced"
    COMPLAINED = "complained"
    DELIVERED = "delivered"
    NONE = "none"
    SENT = "sent"
    UNDELIVERABLE = "undeliverable"

    def __str__(self) -> str:
        return str(self.value)
