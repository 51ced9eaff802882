from enum import StrEnum

class EvidenceSettlementOutcome(StrEnum):
    ACCEPTED = "accepted"
    NOT_ACCEPTED = "not_accepted"

    def __str__(self) -> str:
        return str(self.value)
