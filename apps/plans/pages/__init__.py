"""The plans' pages, one module a page family: plans (a month's budgets and revenue, set by
finance), budgets (each scope's budget against its use to date), holds (hard budgets held at the
edge, their overrides). Each module's `urlpatterns` is mounted by apps/plans/urls.py."""
