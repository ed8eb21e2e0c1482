"""Widgets of the review screens."""
