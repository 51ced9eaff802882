from enum import StrEnum

class Outcome(StrEnum):
    ACKNOWLEDGED = "acknowledged"
    DELIVERED = "delivered"
    NOT_DELIVERED = "not_delivered"

    def __str__(self) -> str:
        return str(self.value)
