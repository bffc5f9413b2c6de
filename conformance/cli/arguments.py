"""Argument types shared by the command's verbs: each refuses a bad value with a line that
says what it expected."""

from __future__ import annotations

import argparse


def positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {value!r}")
    return number


def seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, not {value!r}")
    return number
