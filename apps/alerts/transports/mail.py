"""Email through Django's email backend (EMAIL_* settings): plain text with the link."""

from __future__ import annotations

import smtplib
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage

from apps.alerts.messages import Message, markdown, plain
from apps.alerts.transports.base import Transport, TransportError


class Email(Transport):
    def payload(self, message: Message) -> dict[str, Any]:
        links = ([(message.view_label, message.link)] if message.link else []) + message.actions
        body = markdown(message, escape=plain) + "".join(f"\n\n{label}: {url}" for label, url in links)
        return {"subject": plain(message.title), "body": body}

    def notify(self, message: Message) -> None:
        to = [a.strip() for a in self.channel.email_to.split(",") if a.strip()]
        if not to:
            raise TransportError("no recipient addresses", permanent=True)
        mail = self.payload(message)
        email = EmailMessage(subject=mail["subject"], body=mail["body"], from_email=settings.DEFAULT_FROM_EMAIL, to=to)
        try:
            email.send()
        except smtplib.SMTPRecipientsRefused as exc:
            raise TransportError(f"recipients refused: {', '.join(exc.recipients)}", permanent=True) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise TransportError(f"SMTP: {type(exc).__name__}") from None
