"""Plain helpers of the magics tests (run a line magic, a cell, a compiled cell)."""

from __future__ import annotations


def line(ip, text: str):
    return ip.run_line_magic("trn", text)


def run(ip, source: str):
    result = ip.run_cell(source)
    return result


def compile_cell(ip, options: str, body: str):
    return ip.run_cell(f"%%trn compile {options}\n{body}")
