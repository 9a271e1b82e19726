#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Renders one man page from its Markdown source with go-md2man.

    render_man.py --source sluicectl.8.md --output sluicectl.8 --version 0.1.0
                  [--program build/control/sluicectl] [--schema examples/policy-schema.md]
                  [--md2man go-md2man] [--path-alias DIR=NAME ...]

The source may hold, each on a line of its own:

- @OPTIONS@: replaced by what `PROGRAM --help-man` prints (control/lib/command_line.h),
  the options and commands from the same CLI11 definitions --help prints, so the
  page cannot drift from the program;
- @SCHEMA@: replaced by the policy schema (examples/policy-schema.md) without its
  title, its sections one level down, links into the repository as plain text;

and @VERSION@ anywhere. A marker without its input, or an input without its
marker, is an error: a page would silently lose a section.

Each --path-alias DIR=NAME writes NAME for DIR wherever the page would show it
(sluice-bench's defaults are this build's programs): a page must not depend on
where the checkout is (a long path made man warn "cannot adjust line").
"""
import argparse
import re
import subprocess
import sys

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#+) ")
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def program_options(program):
    """The Markdown the program prints for its man page."""
    done = subprocess.run([program, "--help-man"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.startswith("# OPTIONS"):
        raise SystemExit(f"render_man.py: {program} --help-man exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def unlinked(line):
    """Links into the repository (relative paths, anchors) mean nothing in a
    man page: their text stays, the target goes. Web links keep their URL."""
    return LINK.sub(lambda m: m.group(0) if re.match(r"[a-z]+://", m.group(2)) else m.group(1), line)


def schema_body(path):
    """The schema as the page's DESCRIPTION: its title dropped (NAME says it),
    its ## sections as subsections (go-md2man: ### is .SS)."""
    with open(path, encoding="utf-8") as schema:
        lines = schema.read().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    body, in_code = [], False
    for line in lines:
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code:
            heading = HEADING.match(line)
            if heading and len(heading.group(1)) >= 2:
                line = "#" + line
            line = unlinked(line)
        body.append(line)
    return "\n".join(body).strip("\n") + "\n"


def substitute(text, marker, replacement, source):
    lines = text.split("\n")
    present = marker in lines
    if present != (replacement is not None):
        raise SystemExit(f"render_man.py: {source}: {marker} " + ("has no input" if present else "is missing"))
    if not present:
        return text
    return "\n".join(replacement.rstrip("\n") if line == marker else line for line in lines)


def main():
    parser = argparse.ArgumentParser(description="Renders a man page from Markdown with go-md2man.")
    parser.add_argument("--source", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--program", help="the built program whose --help-man replaces @OPTIONS@")
    parser.add_argument("--schema", help="the policy schema that replaces @SCHEMA@")
    parser.add_argument("--md2man", default="go-md2man")
    parser.add_argument("--path-alias", action="append", default=[], metavar="DIR=NAME",
                        help="show NAME where the page would show the directory DIR")
    args = parser.parse_args()

    with open(args.source, encoding="utf-8") as source:
        text = source.read()
    text = substitute(text, "@OPTIONS@", program_options(args.program) if args.program else None, args.source)
    text = substitute(text, "@SCHEMA@", schema_body(args.schema) if args.schema else None, args.source)
    text = text.replace("@VERSION@", args.version)
    aliases = [alias.split("=", 1) for alias in args.path_alias]
    for directory, name in sorted(aliases, key=lambda alias: len(alias[0]), reverse=True):
        text = text.replace(directory.rstrip("/") + "/", name + "/")

    done = subprocess.run([args.md2man], input=text, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout:
        sys.exit(f"render_man.py: {args.md2man} failed on {args.source}: {done.stderr.strip()}")
    with open(args.output, "w", encoding="utf-8") as output:
        output.write(done.stdout)


if __name__ == "__main__":
    main()
