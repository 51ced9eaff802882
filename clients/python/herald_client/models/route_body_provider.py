from enum import StrEnum

class RouteBodyProvider(StrEnum):
    APNS = "apns"
    FCM = "fcm"
    MAILJET = "mailjet"
    ONESIGNAL = "onesignal"
    POSTMARK = "postmark"
    RESEND = "resend"
    SANDBOX = "sandbox"
    SENDGRID = "sendgrid"
    SES = "ses"
    SLACK = "slack"
    SMTP = "smtp"
    SPARKPOST = "sparkpost"
    TELNYX = "telnyx"
    TWILIO = "twilio"
    WEBHOOK = "webhook"

    def __str__(self) -> str:
        return str(self.value)
