"""A self-contained HTML report: each file with its findings inline, grouped by stage, and the
stage graph (FROM, FROM <stage>, COPY --from) drawn as SVG.

One file: CSS, SVG and a few lines of script are inline, a Content-Security-Policy forbids
every fetch, so the page works offline in any browser. :func:`page` and the helpers here are
shared with the image report (``gpulint.image.html``).
"""

from __future__ import annotations

import html
import json
from typing import Any

from ..finding import Finding, Severity
from ..report import Report

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)

BASE_CSS = """
:root{--fg:#1d2330;--muted:#5f6b7a;--line:#d9dee5;--bg:#fff;--panel:#f5f7fa;
--error:#c62828;--warning:#b26a00;--info:#1565c0;--ok:#2e7d32}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
header.top{padding:14px 24px;border-bottom:1px solid var(--line);background:var(--panel)}
header.top h1{margin:0;font-size:20px}
header.top h1 small{font-weight:400;color:var(--muted);font-size:13px;margin-left:8px}
main{padding:8px 24px 40px;max-width:1280px}
h2{font-size:17px;margin:26px 0 8px}
h3{font-size:15px;margin:18px 0 6px}
code,pre,.mono{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:12.5px}
.muted{color:var(--muted)}
.sev{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:11.5px;font-weight:600;text-transform:uppercase;letter-spacing:.02em}
.sev-error{background:var(--error)}.sev-warning{background:var(--warning)}.sev-info{background:var(--info)}
.counts span{margin-right:10px}
.filters label{margin-right:12px;cursor:pointer;user-select:none}
table{border-collapse:collapse}
table.grid{width:100%}
table.grid th,table.grid td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
table.grid th{background:var(--panel);font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
a{color:#1f5fa8}
.help{color:var(--muted)}
.fix{color:var(--ok)}
details summary{cursor:pointer}
"""

LINT_CSS = """
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0 10px}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0}
section.file{margin-top:10px}
section.file>h2{border-bottom:2px solid var(--fg);padding-bottom:4px}
.graph{overflow-x:auto;border:1px solid var(--line);background:var(--panel);border-radius:4px;padding:6px;margin:6px 0 12px}
.graph text{font:12px system-ui,sans-serif;fill:var(--fg)}
.graph .stage rect{fill:#fff;stroke:#445;stroke-width:1.2}
.graph .stage.shipped rect{stroke:var(--ok);stroke-width:2.5}
.graph .stage.bad rect{fill:#fff4f4}
.graph .ext rect{fill:#e9eef5;stroke:#8a96a8;stroke-dasharray:0}
.graph path{fill:none;stroke:#445;stroke-width:1.3}
.graph path.copy{stroke:#7b4dab;stroke-dasharray:5 4}
.graph text.small{font-size:10.5px;fill:var(--muted)}
.graph .legend{font-size:12px;padding:2px 4px}
section.stage{border-left:4px solid var(--line);padding-left:10px;margin:14px 0}
section.stage.shipped{border-left-color:var(--ok)}
section.stage>h3 .badge{font-size:11px;font-weight:600;color:var(--ok);border:1px solid var(--ok);border-radius:3px;padding:0 5px;margin-left:6px}
table.src{width:100%;table-layout:fixed}
table.src td{padding:0 8px;vertical-align:top}
table.src td.ln{width:52px;text-align:right;color:var(--muted);user-select:none;border-right:1px solid var(--line)}
table.src td.code{white-space:pre-wrap;word-break:break-all}
table.src tr.hit td.ln{background:#fde7e7;color:var(--fg)}
table.src tr.hit.w td.ln{background:#fdf0d9}table.src tr.hit.i td.ln{background:#e3eefb}
table.src tr.f td{padding:3px 8px 6px}
.fbox{border-left:3px solid var(--info);background:var(--panel);padding:4px 8px;border-radius:0 3px 3px 0;white-space:normal;font-family:system-ui,sans-serif}
.fbox.error{border-left-color:var(--error)}.fbox.warning{border-left-color:var(--warning)}
.fbox .msg{margin:2px 0}
body.hide-error .f-error,body.hide-warning .f-warning,body.hide-info .f-info{display:none}
"""

FILTER_JS = """
document.querySelectorAll('.filters input').forEach(function(box){
  box.addEventListener('change',function(){document.body.classList.toggle('hide-'+box.value,!box.checked);});
});
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def script_json(data: Any) -> str:
    """JSON for a <script type="application/json"> block (never closes the tag early)."""
    text = json.dumps(data, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page(title: str, body: str, css: str = "", js: str = "") -> str:
    """The document: one file, inline CSS and script, no fetch allowed."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{BASE_CSS}{css}</style></head>\n"
        f"<body>\n{body}\n<script>{js}</script>\n</body></html>\n"
    )


def severity_badge(severity: str) -> str:
    return f'<span class="sev sev-{esc(severity)}">{esc(severity)}</span>'


def counts_html(counts: dict[str, int]) -> str:
    parts = [f"<span>{severity_badge(sev)} {n}</span>" for sev, n in counts.items() if n]
    return f'<span class="counts">{"".join(parts) or "no findings"}</span>'


def filters_html() -> str:
    boxes = "".join(
        f'<label><input type="checkbox" value="{sev}" checked> {severity_badge(sev)}</label>'
        for sev in ("error", "warning", "info")
    )
    return f'<div class="filters">show {boxes}</div>'


# -- the lint report --------------------------------------------------------------------------


def _finding_box(finding: Finding, rule_urls: dict[str, str]) -> str:
    sev = str(finding.severity)
    url = finding.url or rule_urls.get(finding.code, "")
    code = f'<a href="{esc(url)}">{esc(finding.code)}</a>' if url else esc(finding.code)
    where = f"{finding.line}:{finding.column}"
    parts = [
        f'<div class="fbox {sev}">{severity_badge(sev)} <b>{code}</b> '
        f'<span class="muted">{esc(finding.slug)} · {esc(where)}</span>',
        f'<div class="msg">{esc(finding.message)}</div>',
    ]
    if finding.help:
        parts.append(f'<div class="help">help: {esc(finding.help)}</div>')
    if finding.fix is not None:
        kind = f" ({finding.fix.safety})" if finding.fix.edits else ""
        parts.append(f'<div class="fix">fix: {esc(finding.fix.description)}{esc(kind)}</div>')
    parts.append("</div>")
    return "".join(parts)


def _source_rows(
    lines: list[str], first: int, last: int, by_line: dict[int, list[Finding]], rule_urls: dict[str, str]
) -> str:
    """Rows for lines first..last (1-based, inclusive), each followed by the findings that end there."""
    hit: dict[int, Severity] = {}
    for findings in by_line.values():
        for f in findings:
            for n in range(f.line, max(f.last_line, f.line) + 1):
                hit[n] = max(hit.get(n, Severity.INFO), f.severity)
    rows = []
    for n in range(first, last + 1):
        text = lines[n - 1] if n <= len(lines) else ""
        cls = ""
        if n in hit:
            cls = (
                ' class="hit'
                + {Severity.ERROR: "", Severity.WARNING: " w", Severity.INFO: " i"}[hit[n]]
                + '"'
            )
        rows.append(
            f'<tr id="L{n}"{cls}><td class="ln">{n}</td><td class="code">{esc(text) or " "}</td></tr>'
        )
        for f in by_line.get(n, []):
            rows.append(f'<tr class="f f-{f.severity}"><td></td><td>{_finding_box(f, rule_urls)}</td></tr>')
    return f'<table class="src mono">{"".join(rows)}</table>'


def _graph_svg(df: Any, bad: set[int]) -> str:
    """The stage graph: external bases on top, stages left to right, FROM and COPY --from edges."""
    stages = df.stages
    if not stages:
        return ""
    box_w, box_h, gap = 200.0, 44.0, 36.0
    ext_names: list[str] = []
    ext_of: dict[int, str] = {}
    copies: list[tuple[int, int | str]] = []  # (to stage, from stage index or external name)
    for stage in stages:
        if stage.parent is None:
            name = stage.base.text or stage.base_text
            ext_of[stage.index] = name
            if name not in ext_names:
                ext_names.append(name)
        for _instr, source in stage.copies_from:
            ref = df.stage_named(source) if source else None
            if ref is not None and ref.index < stage.index:
                copies.append((stage.index, ref.index))
            elif source:
                if source not in ext_names:
                    ext_names.append(source)
                copies.append((stage.index, source))
    top, row_y = 12, 12 + box_h + 54
    width = int(max(len(stages), 1) * (box_w + gap) + gap)
    # each external image above the first stage that uses it
    ext_x: dict[str, float] = {}
    used_x: list[float] = []
    for name in ext_names:
        users = [i for i, n in ext_of.items() if n == name] + [t for t, s in copies if s == name]
        x = gap + (min(users) if users else 0) * (box_w + gap)
        while any(abs(x - u) < box_w + 8 for u in used_x):
            x += box_w + gap
        used_x.append(x)
        ext_x[name] = x
        width = max(width, int(x + box_w + gap))
    longest = max(
        [abs(t - s) for t, s in copies if isinstance(s, int)]
        + [s.index - s.parent.index for s in stages if s.parent],
        default=0,
    )
    height = int(row_y + box_h + 8) + (18 + 14 * min(longest, 6) if longest else 0)
    out = [
        f'<svg class="stage-graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="stage graph">',
        '<defs><marker id="arr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#445"/></marker>'
        '<marker id="arrc" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#7b4dab"/></marker></defs>',
    ]

    def sx(index: int) -> float:
        return gap + index * (box_w + gap)

    def label(text: str, limit: int = 28) -> str:
        return esc(text if len(text) <= limit else text[: limit - 1] + "…")

    for name, x in ext_x.items():
        out.append(
            f'<g class="ext"><title>{esc(name)}</title><rect x="{x}" y="{top}" width="{box_w}" height="{box_h}" rx="5"/>'
            f'<text x="{x + 8}" y="{top + 18}" class="small">image</text>'
            f'<text x="{x + 8}" y="{top + 34}">{label(name)}</text></g>'
        )
    shipped = df.shipped
    for stage in stages:
        x = sx(stage.index)
        classes = "stage" + (" shipped" if stage is shipped else "") + (" bad" if stage.index in bad else "")
        name = f"{stage.index}: {stage.name}" if stage.name else f"stage {stage.index}"
        base = stage.base_text
        out.append(
            f'<g class="{classes}"><title>{esc(f"{stage.index}: {name} (FROM {base})")}</title>'
            f'<rect x="{x}" y="{row_y}" width="{box_w}" height="{box_h}" rx="5"/>'
            f'<text x="{x + 8}" y="{row_y + 18}"><tspan font-weight="600">{label(name, 20)}</tspan>'
            + (' <tspan class="small">shipped</tspan>' if stage is shipped else "")
            + f'</text><text x="{x + 8}" y="{row_y + 34}" class="small">FROM {label(base, 28)}</text></g>'
        )
    # edges
    for stage in stages:
        x = sx(stage.index) + box_w / 2
        if stage.parent is not None:
            out.append(
                _arc(
                    sx(stage.parent.index) + box_w / 2,
                    x,
                    row_y + box_h,
                    "from",
                    stage.index - stage.parent.index,
                )
            )
        else:
            name = ext_of[stage.index]
            ex = ext_x[name] + box_w / 2
            out.append(
                f'<path d="M{ex},{top + box_h} C{ex},{top + box_h + 30} {x},{row_y - 30} {x},{row_y - 1}" '
                'marker-end="url(#arr)"/>'
            )
    for target, source in copies:
        x = sx(target) + box_w / 2 + 14
        if isinstance(source, int):
            out.append(_arc(sx(source) + box_w / 2 - 14, x, row_y + box_h, "copy", target - source))
        else:
            ex = ext_x[source] + box_w / 2 + 14
            out.append(
                f'<path class="copy" d="M{ex},{top + box_h} C{ex},{top + box_h + 30} {x},{row_y - 30} {x},{row_y - 1}" '
                'marker-end="url(#arrc)"/>'
            )
    out.append("</svg>")
    return "".join(out)


def _arc(x1: float, x2: float, y: float, kind: str, distance: int) -> str:
    depth = 18 + 14 * min(abs(distance), 6)
    cls = ' class="copy"' if kind == "copy" else ""
    marker = "arrc" if kind == "copy" else "arr"
    return f'<path{cls} d="M{x1},{y} C{x1},{y + depth} {x2},{y + depth} {x2},{y + 1}" marker-end="url(#{marker})"/>'


def _file_section(
    index: int, path: str, report: Report, findings: list[Finding], rule_urls: dict[str, str]
) -> str:
    text = report.sources.get(path)
    counts = {str(s): 0 for s in sorted(Severity, reverse=True)}
    for f in findings:
        counts[str(f.severity)] += 1
    out = [f'<section class="file" id="file-{index}"><h2>{esc(path)} {counts_html(counts)}</h2>']
    facts = report.facts.get(path, {})
    if facts:  # what the rules know about the file that is no finding (the driver it needs)
        out.append(
            '<dl class="facts">'
            + "".join(f"<dt>{esc(name)}</dt><dd>{esc(text)}</dd>" for name, text in facts.items())
            + "</dl>"
        )
    if text is None:
        out.append('<p class="muted">source not available</p>')
        out.extend(f'<div class="f-{f.severity}">{_finding_box(f, rule_urls)}</div>' for f in findings)
        out.append("</section>")
        return "".join(out)
    lines = text.splitlines()
    by_line: dict[int, list[Finding]] = {}
    outside: list[Finding] = []
    for f in findings:
        end = max(f.last_line, f.line)
        if 1 <= f.line <= len(lines):
            by_line.setdefault(min(end, len(lines)), []).append(f)
        else:
            outside.append(f)
    df = None
    try:
        from ..dockerfile import parse_dockerfile

        df = parse_dockerfile(text, path)
    except Exception:  # not a Dockerfile (requirements, compose): shown as it is
        df = None
    if df is not None and df.stages:
        bad = {
            stage.index
            for stage in df.stages
            for f in findings
            if f.severity >= Severity.WARNING
            and stage.from_instruction.line <= f.line <= _stage_end(df, stage.index, len(lines))
        }
        out.append(
            f'<div class="graph">{_graph_svg(df, bad)}<div class="muted legend">'
            "solid arrow: FROM · dashed: COPY --from · green frame: the shipped stage (the last, unless --target)"
            " · red fill: a stage with warnings or errors</div></div>"
        )
        first_from = df.stages[0].from_instruction.line
        if first_from > 1:
            out.append('<section class="stage"><h3>before the first FROM</h3>')
            out.append(_source_rows(lines, 1, first_from - 1, by_line, rule_urls))
            out.append("</section>")
        shipped = df.shipped
        for stage in df.stages:
            start = stage.from_instruction.line
            end = _stage_end(df, stage.index, len(lines))
            title = f"stage {stage.index}" + (f" <code>{esc(stage.name)}</code>" if stage.name else "")
            base = f' <span class="muted">FROM <code>{esc(stage.base_text)}</code></span>'
            badge = '<span class="badge">shipped</span>' if stage is shipped else ""
            cls = "stage shipped" if stage is shipped else "stage"
            out.append(
                f'<section class="{cls}" id="file-{index}-stage-{stage.index}"><h3>{title}{base}{badge}</h3>'
            )
            out.append(_source_rows(lines, start, end, by_line, rule_urls))
            out.append("</section>")
    else:
        out.append(_source_rows(lines, 1, len(lines), by_line, rule_urls))
    out.extend(f'<div class="f-{f.severity}">{_finding_box(f, rule_urls)}</div>' for f in outside)
    out.append("</section>")
    return "".join(out)


def _stage_end(df: Any, index: int, n_lines: int) -> int:
    stages = df.stages
    if index + 1 < len(stages):
        return int(stages[index + 1].from_instruction.line) - 1
    return n_lines


def render(report: Report, *, color: bool = False) -> str:
    rule_urls = {r.code: r.url for r in report.rules if r.url}
    files = report.paths()
    by_file: dict[str, list[Finding]] = {}
    for f in report.findings:
        by_file.setdefault(f.path, []).append(f)
    counts = {str(s): n for s, n in sorted(report.counts().items(), reverse=True)}
    total = len(report.findings)
    version = f" · gpulint {esc(report.tool_version)}" if report.tool_version else ""
    summary = (
        f"{total} finding{'s' if total != 1 else ''} in {len(files)} file{'s' if len(files) != 1 else ''}"
    )
    body = [
        f'<header class="top"><h1>gpulint<small>{esc(summary)}{version}</small></h1>'
        f"<p>{counts_html(counts)}</p>{filters_html()}</header><main>",
    ]
    if len(files) > 1:
        items = "".join(
            f'<li><a href="#file-{i}">{esc(p)}</a> {counts_html(_count(by_file.get(p, [])))}</li>'
            for i, p in enumerate(files)
        )
        body.append(f"<h2>Files</h2><ul>{items}</ul>")
    for i, path in enumerate(files):
        body.append(_file_section(i, path, report, by_file.get(path, []), rule_urls))
    if not files:
        body.append('<p class="muted">No files were linted.</p>')
    body.append("</main>")
    return page("gpulint report", "".join(body), LINT_CSS, FILTER_JS)


def _count(findings: list[Finding]) -> dict[str, int]:
    out = {str(s): 0 for s in sorted(Severity, reverse=True)}
    for f in findings:
        out[str(f.severity)] += 1
    return out
