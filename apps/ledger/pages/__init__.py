"""The ledger's pages, one module a page family: finance (the dashboard, journal lines, links
to the reports), close (the month close with a preparer and an approver), plans (budgets and
revenue), budgets (each line's budget against its actuals), sheets (spreadsheets and the
month pack), reconciliation (supplier bills against the
platform). Each module's `urlpatterns` is mounted by apps/ledger/urls.py."""
