"""A table of the report as the reader gets it: Markdown (the repository and the first page),
LaTeX (a paper), CSV (plain cell strings) and HTML (the Snakemake report), each written atomically.
The tables themselves are built in ``report.tables``; an edit of the rendering rebuilds none.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import pandas as pd

from icl_gd.common.atomic import write_text
from icl_gd.report.tables import PARTIAL_MARK, SEEDS_MARK

# -------------------------------------------------------------------------------- rendering


def _rows_for_render(table: pd.DataFrame, bold_fn) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, body rows (index levels first; a first level that repeats the row above is
    blanked, and so are the next ones up to ``attrs["blank_levels"]`` while they all repeat it)
    and the body positions where a new first-level group starts."""
    best = {(k, c) for k, c in table.attrs.get("best", [])}
    nlev = table.index.nlevels
    names = [n if n is not None else "" for n in table.index.names]
    header = [*names, *map(str, table.columns)]
    body, group_starts = [], []
    prev = None
    blank = min(table.attrs.get("blank_levels", 1), nlev - 1)
    for i, (key, row) in enumerate(table.iterrows()):
        labels = list(key) if nlev > 1 else [key]
        labels = [str(x) for x in labels]
        if nlev > 1:
            if prev is not None and labels[0] != prev[0]:
                group_starts.append(i)
            shown = list(labels)
            for level in range(blank):
                if prev is None or labels[: level + 1] != prev[: level + 1]:
                    break
                shown[level] = ""
            prev, labels = labels, shown
        cells = [bold_fn(str(v)) if (key, col) in best else str(v) for col, v in row.items()]
        body.append([*labels, *cells])
    return header, body, group_starts


def to_markdown(table_df: pd.DataFrame, caption: str | None = None) -> str:
    """A pipe table; best values in **bold**, caption above, footnotes below."""

    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    header, body, _ = _rows_for_render(table_df, lambda s: f"**{s}**")
    header = [esc(h) for h in header]
    body = [[esc(c) for c in row] for row in body]
    nlev = table_df.index.nlevels
    widths = [max([len(header[j]), 3, *(len(r[j]) for r in body)]) for j in range(len(header))]
    lines = []
    if caption:
        lines += [f"**{caption}**", ""]
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    rule = ["-" * w if j < nlev else "-" * (w - 1) + ":" for j, w in enumerate(widths)]
    lines.append("| " + " | ".join(rule) + " |")
    for row in body:
        cells = [c.ljust(w) if j < nlev else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths))]
        lines.append("| " + " | ".join(cells) + " |")
    notes = table_df.attrs.get("footnotes", [])
    if notes:
        lines.append("")
        lines += [f"{n}  " for n in notes[:-1]] + [notes[-1]]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_LATEX_UNICODE = {
    "±": r"$\pm$",
    "—": "---",
    "–": "--",
    SEEDS_MARK: r"\textsuperscript{\dag}",
    PARTIAL_MARK: r"\textsuperscript{\ddag}",
    "Δ": r"$\Delta$",
    "α": r"$\alpha$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX specials (``_ % & $ # { } ~ ^ \\``) and map ± — † ‡ to LaTeX."""
    out = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))
    for uni, tex in _LATEX_UNICODE.items():
        out = out.replace(uni, tex)
    return out


def to_latex(table_df: pd.DataFrame, caption: str | None = None, label: str | None = None) -> str:
    """A booktabs ``table`` environment; best values in ``\\textbf{}``, footnotes under the
    tabular. Needs ``\\usepackage{booktabs}``."""
    header, body, group_starts = _rows_for_render(table_df, lambda s: f"\x00{s}\x01")

    def tex(s: str) -> str:
        return latex_escape(s).replace("\x00", r"\textbf{").replace("\x01", "}")

    nlev = table_df.index.nlevels
    spec = "l" * nlev + "c" * (len(header) - nlev)
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(tex(h) for h in header) + r" \\",
        r"\midrule",
    ]
    for i, row in enumerate(body):
        if i in group_starts:
            lines.append(r"\midrule")
        lines.append(" & ".join(tex(c) for c in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    for note in table_df.attrs.get("footnotes", []):
        lines.append(rf"\par\smallskip{{\footnotesize {tex(note)}}}")
    if caption:
        lines.append(rf"\caption{{{tex(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


_HTML_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 14px; margin: 1.5em; color: #111; }
table { border-collapse: collapse; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: 0.6em; max-width: 70em; }
th, td { padding: 0.25em 0.7em; vertical-align: top; }
thead th { border-bottom: 2px solid #333; text-align: left; }
tbody th { font-weight: normal; text-align: left; min-width: 6em; max-width: 30em; }
td.value, th.value { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.group td, tr.group th { border-top: 1px solid #999; }
tbody tr:hover { background: #f3f6fa; }
p.note { max-width: 70em; font-size: 13px; color: #333; }
"""


def to_html(table_df: pd.DataFrame, caption: str | None = None, title: str | None = None) -> str:
    """A standalone HTML page of the table, for the Snakemake report's viewer: the caption above
    it, best values in <strong>, the marks (—, †, ‡) as they are, footnotes below."""
    header, body, group_starts = _rows_for_render(table_df, lambda s: f"\x00{s}\x01")

    def cell(text: str) -> str:
        return html.escape(text).replace("\x00", "<strong>").replace("\x01", "</strong>")

    nlev = table_df.index.nlevels
    lines = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{html.escape(title or caption or 'table')}</title>",
        f"<style>{_HTML_STYLE}</style>",
        "</head>",
        "<body>",
        "<table>",
    ]
    if caption:
        lines.append(f"<caption>{cell(caption)}</caption>")
    value = ' class="value"'
    lines.append(
        "<thead><tr>"
        + "".join(f'<th scope="col"{"" if j < nlev else value}>{cell(h)}</th>' for j, h in enumerate(header))
        + "</tr></thead>"
    )
    lines.append("<tbody>")
    for i, row in enumerate(body):
        cells = [
            f'<th scope="row">{cell(c)}</th>' if j < nlev else f'<td class="value">{cell(c)}</td>'
            for j, c in enumerate(row)
        ]
        lines.append(('<tr class="group">' if i in group_starts else "<tr>") + "".join(cells) + "</tr>")
    lines += ["</tbody>", "</table>"]
    lines += [f'<p class="note">{cell(note)}</p>' for note in table_df.attrs.get("footnotes", [])]
    lines += ["</body>", "</html>"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- writing


def write_table_files(table_df: pd.DataFrame, stem: str | os.PathLike, caption: str | None = None) -> list[Path]:
    """Write ``stem.md``, ``stem.tex``, ``stem.csv`` (plain cell strings, no markup) and
    ``stem.html`` (what the Snakemake report shows), each atomically; returns the four paths."""
    stem = Path(stem)
    paths = [stem.with_name(stem.name + ext) for ext in (".md", ".tex", ".csv", ".html")]
    label = "tab:" + stem.name.replace("_", "-")
    write_text(paths[0], to_markdown(table_df, caption))
    write_text(paths[1], to_latex(table_df, caption, label=label))
    write_text(paths[2], table_df.reset_index().to_csv(index=False, lineterminator="\n"))
    write_text(paths[3], to_html(table_df, caption, title=stem.name))
    return paths
