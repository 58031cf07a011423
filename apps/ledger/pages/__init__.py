"""The ledger's pages: close (the month close with a preparer and an approver). Each module's
`urlpatterns` is mounted by apps/ledger/urls.py."""
