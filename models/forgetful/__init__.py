"""Forgetful decision trees and forests (Yuan, Sun & Shasha 2023)."""
