from enum import StrEnum

class SuppressionReason(StrEnum):
    BOUNCED = "bounced"
    COMPLAINED = "complained"
    MANUAL = "manual"
    UNSUBSCRIBED = "unsubscribed"

    def __str__(self) -> str:
        return str(self.value)
