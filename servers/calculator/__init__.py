"""Arithmetic tools: add, multiply and safe evaluation of arithmetic expressions."""

from .add import add
from .calculate import calculate
from .multiply import multiply

__all__ = ["add", "calculate", "multiply"]
