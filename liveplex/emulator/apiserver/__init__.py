"""The emulator's in-memory Kubernetes API server (development emulator, not for production)."""

from liveplex.emulator.apiserver.errors import ApiError
from liveplex.emulator.apiserver.routes import Api
from liveplex.emulator.apiserver.storage import Change, DeleteOptions, Store

__all__ = ["Api", "ApiError", "Change", "DeleteOptions", "Store"]
