"""Drift detectors (ADWIN, DDM), their banks, and the DDM-wrapped classifier."""
