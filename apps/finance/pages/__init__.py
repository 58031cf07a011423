"""The finance reader's pages: finance (the month's books as finance reads them, and the journal
lines behind any of its numbers) and sheets (the closed month's pack). Each module's
`urlpatterns` is mounted by apps/finance/urls.py."""
