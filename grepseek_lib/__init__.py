"""GrepSeek: search agents that answer questions by running read-only shell pipelines over a raw corpus."""

__version__ = "0.1.0"
