#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the built man pages (packaging/man/): suite `man`.

    man_pages_test.py [--checkout DIR ...] PAGE[=PROGRAM] ...

Every PAGE must render with `man --warnings -l` without a warning, except
tbl's about the policy's wide tables. For a PAGE=PROGRAM, every --long-option
PROGRAM --help lists must be in the page, and so must every command --help
lists (sluicectl's verbs, sluice-bench's subcommands) with each option its
own --help lists: a page rendered from a stale or broken --help-man fails.
No page may name a --checkout DIR (the source and build trees): a page that
shows where the checkout is renders differently from a longer path.
"""
import os
import re
import subprocess
import sys

LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# tbl's complaints about a table wider than the page and the cells it cannot
# fit; the schema's tables are wide by nature. Anything else is a fault.
ALLOWED_WARNINGS = [
    re.compile(r"table wider than line width"),
    re.compile(r"^warning: file '.*', around line \d+:$"),
    re.compile(r"warning \[.*div '3tbd[^']*'.*\]: (cannot adjust|can't break) line"),
]
COMMAND_SECTIONS = ("Commands:", "Subcommands:")


def render(page):
    """The page as man prints it, and the warnings that were not allowed."""
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MANPAGER="cat", PAGER="cat")
    done = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True, env=env, check=False)
    faults = [line for line in done.stderr.splitlines()
              if line.strip() and not any(allowed.search(line.strip()) for allowed in ALLOWED_WARNINGS)]
    if done.returncode != 0:
        faults.append(f"man exited {done.returncode}")
    # groff prints - as U+2010 (hyphen) or U+2212 (minus) in UTF-8.
    return done.stdout.replace("\u2010", "-").replace("\u2212", "-"), faults


def help_text(program, command):
    done = subprocess.run([program, *command, "--help"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{program} {' '.join(command)} --help exited {done.returncode}: {done.stderr}")
    return done.stdout


def commands_in(help_output):
    """The commands a --help lists, as words: ["policy", "push"], ["decide"]."""
    commands, in_section = [], False
    for line in help_output.splitlines():
        if line.strip() in COMMAND_SECTIONS:
            in_section = True
        elif not line.strip():
            in_section = False
        elif in_section and re.match(r"^  \S", line):
            # The synopsis ends at two spaces; the command at its first argument.
            synopsis = line.strip().split("  ")[0]
            words = []
            for word in synopsis.split():
                if not re.fullmatch(r"[a-z][a-z0-9-]*", word):
                    break
                words.append(word)
            if words:
                commands.append(words)
    return commands


def mentions(page_text, text):
    return re.search(r"(?<![\w-])" + re.escape(text) + r"(?![\w-])", page_text) is not None


def check(page, program):
    """What is wrong with the page: a list of problems."""
    page_text, problems = render(page)
    if not program:
        return problems
    top = help_text(program, [])
    for option in sorted(set(LONG_OPTION.findall(top))):
        if not mentions(page_text, option):
            problems.append(f"{option} ({os.path.basename(program)} --help) is not in the page")
    for command in commands_in(top):
        name = " ".join(command)
        if not mentions(page_text, name):
            problems.append(f"command {name!r} ({os.path.basename(program)} --help) is not in the page")
            continue
        for option in sorted(set(LONG_OPTION.findall(help_text(program, command)))):
            if not mentions(page_text, option):
                problems.append(f"{option} ({name} --help) is not in the page")
    return problems


def checkout_paths_in(page, checkouts):
    with open(page, encoding="utf-8") as roff:
        text = roff.read().replace("\\-", "-")  # roff's escaped hyphens
    return [f"names the checkout's path {directory}" for directory in checkouts if directory in text]


def main():
    arguments, checkouts = sys.argv[1:], []
    while len(arguments) >= 2 and arguments[0] == "--checkout":
        checkouts.append(arguments[1])
        arguments = arguments[2:]
    if not arguments:
        sys.exit(__doc__)
    failed = 0
    for argument in arguments:
        page, _, program = argument.partition("=")
        problems = check(page, program) + checkout_paths_in(page, checkouts)
        print(f"{'FAIL' if problems else 'ok'}: {os.path.basename(page)}")
        for problem in problems:
            print(f"  {problem}")
        failed += bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
