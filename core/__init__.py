"""The kernel every layer may import: limits, errors, settings and input data types."""
