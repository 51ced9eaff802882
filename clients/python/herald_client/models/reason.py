from enum import StrEnum

class Reason(StrEnum):
    CONTRADICTED = "contradicted"
    DUPLICATE_POSSIBLE = "duplicate_possible"
    EXHAUSTED = "exhausted"
    MAY_HAVE_SENT = "may_have_sent"
    REJECTED = "rejected"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return str(self.value)
