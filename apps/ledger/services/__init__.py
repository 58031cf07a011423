"""Writes of the ledger: accrual (accrual.py), periods (periods.py), month-end checks
(checks.py), chart, budgets and revenue (planning.py)."""
