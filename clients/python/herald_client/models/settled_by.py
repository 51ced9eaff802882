from enum import StrEnum

class SettledBy(StrEnum):
    CALLBACK = "callback"
    IDEMPOTENT_REPLAY = "idempotent_replay"
    OUTCOME_QUERY = "outcome_query"
    REVIEW = "review"

    def __str__(self) -> str:
        return str(self.value)
