"""Replay a topic and evaluate: metrics, report."""
