"""What the books tell the apps built on them, without naming them: an app that acts on a
close connects a receiver in its AppConfig.ready (the exports queue the warehouse's files)."""

from __future__ import annotations

from django.dispatch import Signal

# A month was closed (`month`: its first day), sent inside the close's transaction: a receiver
# that starts work elsewhere does so on commit (transaction.on_commit).
period_closed = Signal()
