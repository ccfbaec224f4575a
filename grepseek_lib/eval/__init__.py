"""Evaluation: answer metrics (metrics.py, EM / F1 / micro-macro) and the runners built on them.

Kept import-free so `grepseek --help` does not pull in pandas; import `grepseek_lib.eval.metrics`.
"""
