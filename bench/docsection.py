"""Rewrites one generated section of docs/benchmarks.md.

A section lives between `<!-- NAME:begin -->` and `<!-- NAME:end -->`; the
text between the markers is replaced, everything else is kept. A missing
section is appended (after `heading`, when given).
"""
import os


def replace_section(doc, name, body, heading=None):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = open(doc).read() if os.path.exists(doc) else "# Benchmarks\n"
    if begin in text and end in text:
        pre, rest = text.split(begin, 1)
        _, post = rest.split(end, 1)
        text = pre + begin + "\n" + body + end + post
    else:
        text = text.rstrip("\n") + "\n\n" + (heading + "\n\n" if heading else "")
        text += begin + "\n" + body + end + "\n"
    with open(doc, "w") as f:
        f.write(text)
