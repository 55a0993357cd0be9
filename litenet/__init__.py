"""LiteNet: a small feed-forward network with hand-written gradients, from training to int8 deployment."""

from litenet.errors import LiteNetError

__version__ = "0.1.0"
__all__ = ["LiteNetError", "__version__"]
