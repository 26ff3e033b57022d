"""Synthetic streams with a known truth."""
