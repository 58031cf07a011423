"""Importing the package registers every detector."""

from __future__ import annotations

from apps.alerts.detectors import money, ops, usage
from apps.alerts.detectors.registry import DETECTORS, DetectionResult, Detector, Subject, register_detector

__all__ = ["DETECTORS", "DetectionResult", "Detector", "Subject", "money", "ops", "register_detector", "usage"]
