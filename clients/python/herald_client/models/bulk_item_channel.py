from enum import StrEnum

class BulkItemChannel(StrEnum):
    CHAT = "chat"
    EMAIL = "email"
    PUSH = "push"
    SMS = "sms"
    WEBHOOK = "webhook"

    def __str__(self) -> str:
        return str(self.value)
