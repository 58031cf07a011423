"""The ledger's pages, one module a page family: close (the month close with a preparer and an
approver), plans (budgets and revenue), budgets (each line's budget against its actuals), holds
(hard budgets held at the edge). Each module's `urlpatterns` is mounted by apps/ledger/urls.py."""
