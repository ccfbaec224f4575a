"""Trajectory inspector: load every kind of episode the project writes, filter, browse, report as HTML."""
