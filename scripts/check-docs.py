#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the user documentation: links, anchors, and no run diary in the guides.

    scripts/check-docs.py [--root DIR]

Reads README.md, CHANGELOG.md and docs/**/*.md under DIR (default: the repository this script
is in) and checks that

* every relative link (`[text](path)`, `![alt](path)`, `[id]: path`) resolves to an existing file
  or folder inside DIR;
* every anchor (`#slug` in the same page, or `page.md#slug`) is the GitHub-style slug of a
  heading of that page (lowercased; punctuation other than `-` and `_` dropped; spaces to `-`;
  a repeated heading gets `-1`, `-2`, ...);
* the guide pages (docs/**/*.md except docs/benchmarks.md, the one page of dated numbers)
  contain no ISO date (YYYY-MM-DD), no "issue N" and no `../shared` path.

Links inside fenced code blocks and inline code are not checked; the guide rules apply to every
line. Prints each violation as `file:line: message` and exits 1; otherwise prints one summary
line and exits 0. Standard library only.
"""
import argparse
import os
import re
import sys
import unicodedata
from urllib.parse import unquote

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the text may hold one level of brackets (badges, images)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)"
                         r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
ISO_DATE = re.compile(r"(?<![0-9])[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])(?![0-9])")
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?[0-9]+", re.IGNORECASE)
SHARED_PATH = re.compile(r"\.\./shared\b")


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"<[^>]+>", "", text)                       # inline HTML
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)    # links keep their text
    text = text.replace("`", "")
    out = []
    for ch in text.strip().lower():
        if ch in " -_":
            out.append("-" if ch == " " else ch)
        elif unicodedata.category(ch)[0] in "LNM":
            out.append(ch)
    return "".join(out)


def scan(path):
    """(lines outside code fences as (number, text), the anchors of the page)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    prose, anchors, seen = [], set(), {}
    fence = None
    for number, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        prose.append((number, line))
        h = HEADING.match(line)
        if h:
            base = slug(h.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchors.add(base if n == 0 else f"{base}-{n}")
        for a in HTML_ANCHOR.findall(line):
            anchors.add(a)
    return lines, prose, anchors


def targets(line):
    """The link targets of one line outside code fences, inline code removed."""
    text = INLINE_CODE.sub("", line)
    found = [m.group(1) for m in INLINE_LINK.finditer(text)]
    m = REFERENCE_DEF.match(text)
    if m:
        found.append(m.group(1))
    return [t[1:-1] if t.startswith("<") and t.endswith(">") else t for t in found]


def documents(root):
    docs = [name for name in ("README.md", "CHANGELOG.md") if os.path.isfile(os.path.join(root, name))]
    for folder, dirs, files in os.walk(os.path.join(root, "docs")):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".md"):
                docs.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return docs


def is_guide(rel):
    return rel.startswith("docs/") and rel != "docs/benchmarks.md"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the tree to check (default: this repository)")
    args = ap.parse_args()
    root = os.path.realpath(args.root)
    docs = documents(root)
    cache = {}

    def page(rel):
        if rel not in cache:
            cache[rel] = scan(os.path.join(root, rel))
        return cache[rel]

    problems = []
    links = anchors_checked = 0
    for rel in docs:
        lines, prose, anchors = page(rel)
        here = os.path.dirname(os.path.join(root, rel))
        for number, line in prose:
            for target in targets(line):
                if not target or SCHEME.match(target) or target.startswith("//"):
                    continue
                links += 1
                path, _, anchor = target.partition("#")
                path = unquote(path)
                if path:
                    full = os.path.realpath(os.path.join(root if path.startswith("/") else here,
                                                         path.lstrip("/")))
                    if full != root and not full.startswith(root + os.sep):
                        problems.append(f"{rel}:{number}: link leaves the repository: {target}")
                        continue
                    if not os.path.exists(full):
                        problems.append(f"{rel}:{number}: broken link: {target} (no such file)")
                        continue
                    target_rel = os.path.relpath(full, root).replace(os.sep, "/")
                else:
                    target_rel = rel
                if anchor and target_rel.endswith(".md") and os.path.isfile(os.path.join(root, target_rel)):
                    anchors_checked += 1
                    if unquote(anchor) not in page(target_rel)[2]:
                        problems.append(f"{rel}:{number}: broken anchor: {target} "
                                        f"(no heading '#{anchor}' in {target_rel})")
        if is_guide(rel):
            for number, line in enumerate(lines, 1):
                for rule, message in ((ISO_DATE, "a date in a guide page (dates belong in "
                                                 "docs/benchmarks.md, CHANGELOG.md or lab/)"),
                                      (ISSUE_NUMBER, "an issue number in a guide page"),
                                      (SHARED_PATH, "a path outside the repository (../shared)")):
                    m = rule.search(line)
                    if m:
                        problems.append(f"{rel}:{number}: {message}: '{m.group(0)}'")

    for p in problems:
        print(p)
    if problems:
        print(f"check-docs: {len(problems)} problem(s) in {len(docs)} pages", file=sys.stderr)
        return 1
    print(f"check-docs: {len(docs)} pages, {links} relative links, {anchors_checked} anchors: "
          f"all resolve; no dates, issue numbers or ../shared paths in the guides")
    return 0


if __name__ == "__main__":
    sys.exit(main())
