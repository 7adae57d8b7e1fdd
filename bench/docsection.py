"""Rewrites one generated section of docs/benchmarks.md, and writes a run's
raw results beside it (write_results).

A section lives between `<!-- NAME:begin -->` and `<!-- NAME:end -->`; the
text between the markers is replaced, everything else is kept. A missing
section is appended (after `heading`, when given).
"""
import datetime
import json
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


def write_results(root, name, run, report, doc, explain, heading, write_doc=True):
    """Writes run to ROOT/bench/results/NAME-<UTC time>.json, with
    run["ratios"] = the summary that report(run, path) returns beside the
    section text; prints the section, and unless not write_doc puts
    explain + section in section NAME of doc."""
    out_dir = os.path.join(root, "bench", "results")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{name}-" + datetime.datetime.now(datetime.timezone.utc)
                       .strftime("%Y%m%dT%H%M%SZ") + ".json")
    section, summary = report(run, out)
    run["ratios"] = summary
    with open(out, "w") as f:
        json.dump(run, f, indent=1)
    print(f"raw results: {out}\n")
    print(section)
    if write_doc:
        replace_section(doc, name, explain + section, heading=heading)
        print(f"rewrote the {name} section of {os.path.relpath(doc, root)}")
