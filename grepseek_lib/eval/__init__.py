"""Evaluation: the agent over benchmarks (runner), the BM25 baseline, tables across systems, the search report,
loss causes and figures. Answer metrics live one floor down in grepseek_lib/metrics.py (the reward and the
data builder use them too).
"""
