"""liveplex: serve full-duplex speech models to many callers over GPT-Live WebSockets."""

__version__ = "0.1.0"
