"""poet-edge: compile neural-network training for microcontrollers."""

__version__ = "0.1.0"
