from enum import StrEnum

class AttemptResult(StrEnum):
    ACCEPTED = "accepted"
    AMBIGUOUS = "ambiguous"
    IN_FLIGHT = "in_flight"
    REJECTED = "rejected"

    def __str__(self) -> str:
        return str(self.value)
