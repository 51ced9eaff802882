from enum import StrEnum

class Certainty(StrEnum):
    DUPLICATE_POSSIBLE = "duplicate_possible"
    KNOWN = "known"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return str(self.value)
