#!/usr/bin/env python3
"""Sums the results of every test stage into the closing line.

Inputs: the C runner's results file ("PASS|FAIL|SKIP suite:name reason"
lines) and pytest JUnit XML files. Prints failed and skipped tests by name,
then "N passed, N failed, N skipped". Exit status 1 when anything failed or
when no test ran at all.
"""
import sys
import xml.etree.ElementTree as ET


def main(paths):
    passed, failed, skipped = [], [], []
    for path in paths:
        try:
            if path.endswith(".xml"):
                root = ET.parse(path).getroot()
                for suite in root.iter("testsuite"):
                    sname = suite.get("name", "pytest")
                    for case in suite.iter("testcase"):
                        name = f"{sname}:{case.get('classname')}.{case.get('name')}"
                        if case.find("failure") is not None or case.find("error") is not None:
                            el = case.find("failure") if case.find("failure") is not None else case.find("error")
                            failed.append((name, (el.get("message") or "")[:200]))
                        elif case.find("skipped") is not None:
                            skipped.append((name, case.find("skipped").get("message", "")))
                        else:
                            passed.append(name)
            else:
                for line in open(path):
                    parts = line.rstrip("\n").split(" ", 2)
                    if len(parts) < 2:
                        continue
                    verdict, name = parts[0], parts[1]
                    why = parts[2] if len(parts) > 2 else ""
                    {"PASS": lambda: passed.append(name),
                     "FAIL": lambda: failed.append((name, why)),
                     "SKIP": lambda: skipped.append((name, why))}.get(verdict, lambda: None)()
        except (OSError, ET.ParseError) as e:
            failed.append((f"results:{path}", f"missing or unreadable: {e}"))
    for name, why in skipped:
        print(f"SKIPPED {name}: {why}")
    for name, why in failed:
        print(f"FAILED  {name}: {why}")
    total = len(passed) + len(failed) + len(skipped)
    if total == 0:
        failed.append(("no tests", "nothing ran"))
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
