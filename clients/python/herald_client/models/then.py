from enum import StrEnum

class Then(StrEnum):
    CLOSE = "close"
    RESEND = "resend"

    def __str__(self) -> str:
        return str(self.value)
