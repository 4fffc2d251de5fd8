"""A small Markdown-to-HTML converter for what attnflow writes: pipe tables, headings, paragraphs,
lists, ``code``, **bold**, *emphasis* and [links](url). Everything else is shown as escaped text; the
converter never passes raw HTML through (the page has no script but its own)."""

from __future__ import annotations

import html
import re

__all__ = ["markdown_to_html"]

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_EM = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_SAFE_URL = re.compile(r"^(https?://|#|\.{0,2}/|[\w.-]+(/|$))")


def _inline(text: str) -> str:
    """Escape, then mark up code spans, bold, emphasis and links (code spans are protected first)."""
    codes: list[str] = []

    def keep(m: re.Match) -> str:
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x00{len(codes) - 1}\x00"

    text = _CODE.sub(keep, text)
    text = html.escape(text, quote=False)
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    text = _EM.sub(r"<em>\1</em>", text)

    def link(m: re.Match) -> str:
        url = html.unescape(m.group(2))
        if not _SAFE_URL.match(url):
            return m.group(0)
        return f'<a href="{html.escape(url)}">{m.group(1)}</a>'

    text = _LINK.sub(link, text)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [c.strip() for c in line.split("|")]


def _is_rule(line: str) -> bool:
    return bool(re.fullmatch(r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?", line.strip()))


def markdown_to_html(text: str) -> str:
    """HTML for a Markdown text (the subset described in the module docstring).

    Examples
    --------
    >>> markdown_to_html("| a | b |\\n|---|---|\\n| 1 | `x<y` |")
    '<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td><code>x&lt;y</code></td></tr></tbody></table>'
    """
    lines = text.splitlines()
    out: list[str] = []
    para: list[str] = []
    i = 0

    def flush() -> None:
        if para:
            out.append("<p>" + _inline(" ".join(para)) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            flush()
            i += 1
        elif stripped.startswith("|") and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            flush()
            head = "".join(f"<th>{_inline(c)}</th>" for c in _cells(stripped))
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(lines[i])) + "</tr>")
                i += 1
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
        elif m := re.match(r"(#{1,6})\s+(.*)", stripped):
            flush()
            level = min(len(m.group(1)) + 2, 6)  # page headings are h1/h2; a document's # becomes h3
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
            i += 1
        elif re.match(r"([-*]|\d+\.)\s+", stripped):
            flush()
            items = []
            ordered = bool(re.match(r"\d+\.", stripped))
            while i < len(lines) and (m := re.match(r"\s*([-*]|\d+\.)\s+(.*)", lines[i])):
                item = [m.group(2)]
                i += 1
                while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                    item.append(lines[i].strip())
                    i += 1
                items.append(f"<li>{_inline(' '.join(item))}</li>")
            tag = "ol" if ordered else "ul"
            out.append(f"<{tag}>{''.join(items)}</{tag}>")
        elif stripped.startswith("```"):
            flush()
            block = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1
            out.append(f"<pre>{html.escape(chr(10).join(block))}</pre>")
        else:
            para.append(stripped)
            i += 1
    flush()
    return "\n".join(out)
