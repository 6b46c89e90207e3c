#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Doxygen input filter for README.md, the API reference's main page (docs/api/Doxyfile,
FILTER_PATTERNS). Doxygen runs it as `python3 docs/api/readme-filter.py README.md` and reads
the page from its standard output.

The README's links are relative to the repository root, for readers of the repository. Doxygen
1.9.4 turns a link to a Markdown file into a reference to a Doxygen page, which fails (a
warning, so scripts/api-docs.sh fails) for every guide in docs/, since the guides are not part
of the reference. This filter rewrites each relative link outside code into an HTML link
relative to the HTML's folder, build/api-docs/html/, so that it opens the file in the checkout.
Links to the pages of docs/api/ (part of the reference) and links with a scheme or to an anchor
of the page itself are left as they are. Every line stays on its line, so Doxygen's line numbers
match the README. Standard library only.
"""
import html
import re
import sys

HTML_TO_ROOT = "../../../"  # from build/api-docs/html/ (OUTPUT_DIRECTORY + html/) to the root
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"(?<!!)\[([^\[\]]+)\]\(([^()\s]+)\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def rewrite_link(match):
    text, target = match.group(1), match.group(2)
    if SCHEME.match(target) or target.startswith(("#", "/")) or target.startswith("docs/api/"):
        return match.group(0)
    return f'<a href="{html.escape(HTML_TO_ROOT + target, quote=True)}">{text}</a>'


def rewrite_prose(line):
    """Rewrites the links of one line outside code fences, leaving inline code alone."""
    out, last = [], 0
    for code in INLINE_CODE.finditer(line):
        out.append(LINK.sub(rewrite_link, line[last:code.start()]))
        out.append(code.group(0))
        last = code.end()
    out.append(LINK.sub(rewrite_link, line[last:]))
    return "".join(out)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        lines = f.read().split("\n")
    fence = None
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
        elif m:
            fence = m.group(1)
        else:
            lines[i] = rewrite_prose(line)
    sys.stdout.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
