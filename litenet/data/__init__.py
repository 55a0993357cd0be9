"""CIFAR-10 for LiteNet: read either published layout, convert once to memory maps, open them read-only."""

from litenet.data.conversion import convert
from litenet.data.dataset import Cifar10, Split, open_cifar10
from litenet.data.locate import locate_source
from litenet.data.readers import CLASS_NAMES

__all__ = ["CLASS_NAMES", "Cifar10", "Split", "convert", "locate_source", "open_cifar10"]
