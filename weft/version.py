"""Weft's version, in a module of its own so that any module can read it without
importing the package root (which imports the front end and the compiler)."""

__version__ = "0.1.0"
