"""`gpulint image --format html`: where the gigabytes go, as one self-contained page.

A zoomable treemap of each image (layer -> directory -> file, sized by bytes, coloured by what
the bytes are: weights, CUDA toolkit, CUDA libraries, caches, driver libraries, hidden bytes),
the layer table with each layer's ``created_by``, the pull estimate, the savings each fix would
bring as a bar chart, and the findings with their help. Several images compare side by side.

The treemap is laid out here (squarified) and drawn as inline SVG: one view per open node,
showing its children and their children, so each node is drawn at most twice. A few lines of
inline script switch views on click and show tooltips; nothing is fetched when the page opens.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..records import record
from ..reporters.html import esc, page, script_json, severity_badge
from ..rule import all_rules, find_rule, first_line
from .analysis import Analysis
from .checks import human
from .report import driver_text
from .sizetree import SizeNode

CATEGORY_LABELS = {
    "weights": "model weights",
    "toolkit": "CUDA toolkit (devel only)",
    "cuda": "CUDA libraries",
    "driver": "driver libraries",
    "cache": "caches",
    "hidden": "hidden by a later layer",
    "other": "other",
}
CATEGORY_COLOURS = {
    "weights": "#cc79a7",
    "toolkit": "#e69f00",
    "cuda": "#f0e442",
    "driver": "#d55e00",
    "cache": "#009e73",
    "hidden": "#a3a3a3",
    "other": "#9cc3e6",
}
PAGE_WIDTH = 1180  # px: the treemaps are drawn 1 unit = 1 px at this width
TREEMAP_HEIGHT = 540
HEADER = 17  # px of a group's title strip
GROUP_COLOUR = "#4f5b69"  # a group's frame and title strip
INNER_GROUP_COLOUR = "#76818e"
NEST_LEVELS = 2  # each view draws its children and, with room, two levels below them

IMAGE_CSS = """
main{max-width:1240px}
.cols{display:grid;gap:16px}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}
.card{background:var(--panel);border:1px solid var(--line);border-radius:4px;padding:6px 10px;min-width:130px}
.card b{display:block;font-size:17px}
.card span{color:var(--muted);font-size:12px}
.tm{position:relative}
.tm-view{display:none;width:100%;height:auto;background:#fff;border:1px solid var(--line)}
.tm-view.on{display:block}
.tm-view text{font:11px system-ui,sans-serif;fill:#111;pointer-events:none}
.tm-view text.h{font-weight:600;fill:#fff}
.tm-view rect{stroke:#fff;stroke-width:1}
.tm-view [data-v]{cursor:zoom-in}
.tm-view g.tm-n:hover>rect:first-child{stroke:#111;stroke-width:2}
.crumbs{margin:4px 0;min-height:26px}
.crumbs button{font:inherit;border:1px solid var(--line);background:var(--panel);border-radius:3px;padding:1px 8px;cursor:pointer}
.crumbs button:disabled{background:#fff;color:var(--fg);font-weight:600;cursor:default}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12.5px;margin:6px 0}
.legend i{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:4px}
#tip{position:fixed;pointer-events:none;background:#1d2330;color:#fff;padding:6px 9px;border-radius:4px;font-size:12px;max-width:460px;z-index:10;word-break:break-all}
#tip b{font-size:13px}
table.layers td.cmd{max-width:560px}
table.layers td.cmd code{white-space:pre-wrap;word-break:break-all}
table.layers tr[data-v]{cursor:zoom-in}
table.layers tr[data-v]:hover{background:#f0f4fa}
.share{display:inline-block;height:9px;background:#5b8fd0;vertical-align:middle;margin-right:6px}
.bars text{font:12px system-ui,sans-serif;fill:var(--fg)}
.delta-good{color:var(--ok)}.delta-bad{color:var(--error)}
section.image{margin-top:18px}
section.image>h2{border-bottom:2px solid var(--fg);padding-bottom:4px}
"""

IMAGE_JS = """
(function(){
var data={};
document.querySelectorAll('script.tm-data').forEach(function(s){data[s.dataset.img]=JSON.parse(s.textContent);});
var tip=document.getElementById('tip');
function fmt(n){var u=['B','KB','MB','GB','TB'],i=0;while(n>=1000&&i<4){n/=1000;i++;}return i?n.toFixed(2)+' '+u[i]:n+' B';}
function show(id){
  var v=document.getElementById(id);if(!v)return;
  var tm=v.closest('.tm');
  tm.querySelectorAll('.tm-view').forEach(function(x){x.classList.toggle('on',x===v);});
  var chain=[],c=v;
  while(c){chain.unshift(c);c=c.dataset.up?document.getElementById(c.dataset.up):null;}
  var nav=tm.querySelector('.crumbs');nav.textContent='';
  chain.forEach(function(p,i){
    if(i)nav.appendChild(document.createTextNode(' \\u203a '));
    var b=document.createElement('button');b.textContent=p.dataset.title;b.dataset.go=p.id;b.disabled=p===v;nav.appendChild(b);
  });
}
document.addEventListener('click',function(e){
  var t=e.target.closest('[data-go],[data-v]');if(!t)return;
  var id=t.dataset.go||t.dataset.v;show(id);
  if(t.tagName==='TR'){document.getElementById(id).closest('.tm').scrollIntoView({block:'start'});}
});
document.addEventListener('keydown',function(e){
  if(e.key!=='Escape')return;
  document.querySelectorAll('.tm-view.on').forEach(function(v){if(v.dataset.up)show(v.dataset.up);});
});
document.addEventListener('mousemove',function(e){
  var t=e.target.closest&&e.target.closest('.tm [data-n]');
  if(!t){tip.hidden=true;return;}
  var n=data[t.closest('.tm').dataset.img][+t.dataset.n];
  tip.textContent='';
  var b=document.createElement('b');b.textContent=n[0];tip.appendChild(b);
  var lines=[n[1],fmt(n[2])+(n[3]>1?' in '+n[3]+' files':'')];
  var cats=n[4];Object.keys(cats).forEach(function(k){lines.push(k+': '+fmt(cats[k]));});
  if(n[5])lines.push(n[5]);
  lines.forEach(function(l){if(!l)return;tip.appendChild(document.createElement('br'));tip.appendChild(document.createTextNode(l));});
  tip.hidden=false;
  var x=e.clientX+14,y=e.clientY+14,r=tip.getBoundingClientRect();
  if(x+r.width>innerWidth)x=e.clientX-r.width-10;if(y+r.height>innerHeight)y=e.clientY-r.height-10;
  tip.style.left=x+'px';tip.style.top=y+'px';
});
})();
"""


# -- layout ---------------------------------------------------------------------------------------


def squarify(
    sizes: Sequence[float], x: float, y: float, w: float, h: float
) -> list[tuple[float, float, float, float]]:
    """Rectangles (x, y, w, h) for ``sizes`` (sorted biggest first) filling the box, as square as
    the squarified algorithm (Bruls, Huizing, van Wijk) makes them. Zero sizes get empty boxes."""
    out: list[tuple[float, float, float, float]] = [(x, y, 0.0, 0.0)] * len(sizes)
    items = [(i, float(s)) for i, s in enumerate(sizes) if s > 0]
    total = sum(s for _, s in items)
    if total <= 0 or w <= 0 or h <= 0:
        return out
    scale = w * h / total
    areas = [(i, s * scale) for i, s in items]

    def worst(row: list[float], side: float) -> float:
        s = sum(row)
        return max(side * side * max(row) / (s * s), (s * s) / (side * side * min(row)))

    k = 0
    while k < len(areas):
        side = min(w, h)
        row = [areas[k][1]]
        j = k + 1
        while j < len(areas) and worst([*row, areas[j][1]], side) <= worst(row, side):
            row.append(areas[j][1])
            j += 1
        s = sum(row)
        if j >= len(areas):  # the last row takes what is left (no rounding gap)
            s = w * h
        if w >= h:
            cw = s / h
            yy = y
            for (index, area), _ in zip(areas[k:j], row, strict=True):
                rh = area / s * h if s else 0
                out[index] = (x, yy, cw, rh)
                yy += rh
            x, w = x + cw, w - cw
        else:
            rh = s / w
            xx = x
            for (index, area), _ in zip(areas[k:j], row, strict=True):
                rw = area / s * w if s else 0
                out[index] = (xx, y, rw, rh)
                xx += rw
            y, h = y + rh, h - rh
        k = j
    return out


# -- the treemap ------------------------------------------------------------------------------


@record
class _Node:
    """A treemap node: a layer, a directory, a file or folded small entries."""

    index: int
    name: str
    path: str
    size: int
    files: int
    bytes_by: dict[str, int]
    category: str
    children: list[_Node]
    note: str = ""
    is_layer: bool = False


def _flatten(layers: list[Any], walked: bool) -> tuple[_Node, list[_Node]]:
    """The image as one tree of nodes (root: the image, its children: the layers, in order) and
    the table of all nodes by index (what the tooltips read)."""
    table: list[_Node] = []

    def add(node: SizeNode, prefix: str) -> _Node:
        label = node.name if node.kind != "dir" or not node.children else node.name + "/"
        path = "/" + node.path if node.kind != "rest" else f"/{node.path}/… ({node.name})".replace("//", "/")
        item = _Node(len(table), label, path, node.size, node.files, dict(node.bytes_by), node.category, [])
        item.note = prefix
        table.append(item)
        item.children = [add(child, prefix) for child in node.children if child.size > 0]
        return item

    root = _Node(-1, "image", "", 0, 0, {}, "other", [])
    for layer in layers:
        created = _short_command(layer.created_by)
        note = f"layer {layer.index + 1}: {created[:160]}" if created else f"layer {layer.index + 1}"
        tree = layer.tree
        if walked and tree is not None:
            item = _Node(
                len(table), f"layer {layer.index + 1}", "", layer.size, layer.files, dict(tree.bytes_by),
                tree.category, [], note, True,
            )  # fmt: skip
            table.append(item)
            item.children = [add(child, note) for child in tree.children if child.size > 0]
        else:
            size = layer.size if walked else (layer.compressed_size or 0)
            item = _Node(
                len(table), f"layer {layer.index + 1}", "", size, layer.files, {}, "other", [], note, True
            )
            if not walked:
                item.note = note + " (compressed size: layers not walked)"
            table.append(item)
        root.children.append(item)
        root.size += item.size
        root.files += item.files
    return root, table


def _label(text: str, width: float) -> str:
    room = int((width - 6) / 6.4)
    if room < 3:
        return ""
    return text if len(text) <= room else text[: max(room - 1, 1)] + "…"


def _rect(x: float, y: float, w: float, h: float, fill: str) -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}"/>'


def _view(img: int, node: _Node, width: float, height: float, up: str | None, title: str) -> str:
    view_id = f"v{img}-{'root' if node.index < 0 else node.index}"
    parts = [
        f'<svg class="tm-view{" on" if up is None else ""}" id="{view_id}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" data-title="{esc(title)}"'
        + (f' data-up="{up}"' if up else "")
        + ' role="img">'
    ]
    if up is None:
        parts[0] = parts[0].replace('class="tm-view on"', 'class="tm-view on tm-root"')
    kids = sorted(node.children, key=lambda n: -n.size)
    rects = squarify([k.size for k in kids], 0, 0, width, height)
    for kid, box in zip(kids, rects, strict=True):
        _draw(parts, img, kid, box, NEST_LEVELS, True)
    parts.append("</svg>")
    return "".join(parts)


def _draw(
    parts: list[str], img: int, node: _Node, box: tuple[float, float, float, float], nest: int, top: bool
) -> None:
    """One node's box; with room, its children inside it (down to ``nest`` more levels)."""
    x, y, w, h = box
    if (w < 0.6 or h < 0.6) and not top:
        return  # too small to see; a view's own children are always there (one per layer at the top)
    classes = ("tm-n tm-layer" if node.is_layer else "tm-n") if top else ""
    attrs = f' class="{classes}"' if classes else ""
    zoom = f' data-v="v{img}-{node.index}"' if node.children and top else ""  # one level per click
    parts.append(f'<g{attrs} data-n="{node.index}"{zoom}>')
    title = f"{node.name} {human(node.size)}" if top else node.name
    if node.children and nest > 0 and w > 30 and h > HEADER + 14:
        parts.append(_rect(x, y, w, h, GROUP_COLOUR if top else INNER_GROUP_COLOUR))
        label = _label(title, w)
        if label:
            parts.append(f'<text class="h" x="{x + 4:.1f}" y="{y + 12.5:.1f}">{esc(label)}</text>')
        inner = sorted(node.children, key=lambda n: -n.size)
        boxes = squarify([c.size for c in inner], x + 2, y + HEADER, w - 4, h - HEADER - 2)
        for child, child_box in zip(inner, boxes, strict=True):
            _draw(parts, img, child, child_box, nest - 1, False)
    else:
        parts.append(_rect(x, y, w, h, CATEGORY_COLOURS[node.category]))
        if h > 14:
            label = _label(title, w)
            if label:
                parts.append(f'<text x="{x + 3:.1f}" y="{y + 11.5:.1f}">{esc(label)}</text>')
    parts.append("</g>")


def _treemap(img: int, root: _Node, table: list[_Node], width: float, root_height: float) -> str:
    views = [_view(img, root, width, root_height, None, "image")]
    stack = [(n, f"v{img}-root") for n in root.children]
    while stack:
        node, up = stack.pop()
        if not node.children:
            continue
        title = node.name if node.is_layer else node.name.rstrip("/")
        views.append(_view(img, node, width, TREEMAP_HEIGHT, up, title))
        stack.extend((child, f"v{img}-{node.index}") for child in node.children)
    nodes = [
        [n.name, n.path, n.size, n.files, {CATEGORY_LABELS[k]: v for k, v in n.bytes_by.items() if v}, n.note]
        for n in table
    ]
    return (
        f'<div class="tm" data-img="{img}"><div class="crumbs"><button disabled>image</button></div>'
        + "".join(views)
        + f'<script type="application/json" class="tm-data" data-img="{img}">{script_json(nodes)}</script></div>'
    )


def _legend(analysis: Analysis) -> str:
    totals: dict[str, int] = {}
    for layer in analysis.layers:
        if layer.tree is not None:
            for k, v in layer.tree.bytes_by.items():
                totals[k] = totals.get(k, 0) + v
    items = []
    for key, label in CATEGORY_LABELS.items():
        amount = f" {human(totals[key])}" if totals.get(key) else ""
        items.append(
            f'<span><i style="background:{CATEGORY_COLOURS[key]}"></i>{esc(label)}{esc(amount)}</span>'
        )
    return f'<div class="legend">{"".join(items)}</div>'


# -- the rest of the page -------------------------------------------------------------------------


def _short_command(created_by: str) -> str:
    """A layer's ``created_by`` as one would write it: no ``/bin/sh -c``, no ``#(nop)``."""
    text = (created_by or "").strip()
    text = re.sub(r"^\|\d+(\s+\S+=\S*)*\s+(?=/bin/)", "", text)  # BuildKit's ARG prefix
    text = re.sub(r"^(RUN\s+)?/bin/(ba)?sh -c\s+(#\(nop\)\s*)?", "", text)
    return re.sub(r"\s*# buildkit$", "", text)


def _savings(report: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(code, what, bytes) of each fix, biggest first; each rule labels its own fix and says
    which caches and hidden bytes are its to report."""
    rules = all_rules()
    out: list[tuple[str, str, int]] = []
    for code, size in report["savings"].items():
        rule = find_rule(code)
        out.append((code, (rule.saving_label or rule.summary) if rule else code, int(size)))
    cache_owner = {name: rule.code for rule in rules for name in rule.image_caches}
    for name, size in report["caches"].items():
        out.append((cache_owner.get(name, ""), f"remove the {name} in the layer that makes it", int(size)))
    if report["wasted_bytes"]:
        for rule in rules:
            if rule.owns_hidden_bytes:
                out.append((rule.code, rule.saving_label or rule.summary, int(report["wasted_bytes"])))
    return sorted(out, key=lambda item: -item[2])


def _bars(report: dict[str, Any], width: float) -> str:
    items = _savings(report)
    if not items:
        return '<p class="muted">No savings found: nothing the rules know how to take out.</p>'
    total = report["uncompressed_size"] or 1
    biggest = max(size for _, _, size in items) or 1
    label_w = min(430.0, width * 0.5)
    bar_w = width - label_w - 150
    row = 24
    parts = [
        f'<svg class="bars" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {row * len(items) + 4}" '
        f'width="100%" role="img" aria-label="savings per fix">'
    ]
    for i, (code, what, size) in enumerate(items):
        y = i * row + 2
        w = max(2.0, bar_w * size / biggest)
        text = f"{code} {what}" if code else what
        room = int(label_w / 6.6)
        short = text if len(text) <= room else text[: room - 1] + "…"
        parts.append(
            f"<g><title>{esc(text)}: {esc(human(size))}</title>"
            f'<text x="0" y="{y + 15}">{esc(short)}</text>'
            f'<rect x="{label_w:.0f}" y="{y + 3}" width="{w:.1f}" height="{row - 8}" fill="#2e7d32" rx="2"/>'
            f'<text x="{label_w + w + 6:.1f}" y="{y + 15}">{esc(human(size))} ({size / total * 100:.1f}%)</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts) + '<p class="muted">Each fix on its own, unpacked bytes; they can overlap.</p>'


def _cards(report: dict[str, Any]) -> str:
    cuda = report["cuda"]
    pull = report["pull_estimate"]
    cards = [
        (human(report["compressed_size"]), "to pull (compressed)"),
        (human(report["uncompressed_size"]), "unpacked, all layers"),
        (human(report["final_size"]), "in the final filesystem"),
        (human(report["wasted_bytes"]), "hidden by later layers"),
    ]
    if pull["seconds"] is not None:
        cards.append((f"~{pull['seconds']} s", f"pull at {pull['bandwidth_bps'] / 1e9:g} Gbit/s"))
        if pull.get("cost") is not None:
            nodes = pull.get("nodes") or 1
            if nodes > 1:
                cards.append(
                    (f"~{pull['rollout_cost']:g}", f"per rollout to {nodes} nodes ({pull['cost']:g} each)")
                )
            else:
                cards.append((f"~{pull['cost']:g}", f"per pull at {pull['price_per_hour']:g}/hour"))
    if cuda["cuda_version"]:
        flavour = f" {cuda['flavour']}" if cuda["flavour"] else ""
        driver = driver_text(cuda) or "CUDA"
        cards.append((f"CUDA {cuda['cuda_version']}{flavour}", driver))
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><b>{esc(value)}</b><span>{esc(what)}</span></div>' for value, what in cards
        )
        + "</div>"
    )


def _layer_table(img: int, report: dict[str, Any], root: _Node) -> str:
    rows = []
    for layer, node in zip(report["layers"], root.children, strict=True):
        share = layer["share"]
        largest = "<br>".join(
            f"{esc(f['path'])} <span class='muted'>{esc(human(f['size']))}</span>"
            for f in layer["largest"][:3]
        )
        zoom = f' data-v="v{img}-{node.index}"' if node.children else ""
        rows.append(
            f"<tr{zoom}><td class='num'>{layer['index']}</td><td class='num'>{esc(human(layer['size']))}</td>"
            f"<td class='num'><span class='share' style='width:{max(1, round(share * 80))}px'></span>{share * 100:.1f}%</td>"
            f"<td class='num'>{layer['files']}</td>"
            f"<td class='cmd'><code>{esc(_short_command(layer['created_by']))}</code></td>"
            f"<td class='mono'>{largest}</td></tr>"
        )
    return (
        "<table class='grid layers'><tr><th class='num'>#</th><th class='num'>size</th><th class='num'>share</th>"
        "<th class='num'>files</th><th>created by</th><th>largest files</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _findings(report: dict[str, Any]) -> str:
    findings = report["findings"]
    if not findings:
        return '<p class="muted">No findings.</p>'
    rows = []
    for f in findings:
        rule = find_rule(f["code"])
        help_text = f["help"] or (first_line(rule.instead) if rule else "")
        url = f.get("url") or ""
        code = f'<a href="{esc(url)}">{esc(f["code"])}</a>' if url else esc(f["code"])
        rows.append(
            f"<tr><td>{severity_badge(f['severity'])}</td><td><b>{code}</b><br><span class='muted'>{esc(f['slug'])}</span></td>"
            f"<td class='num'>{f['line']}</td><td>{esc(f['message'])}"
            + (f"<div class='help'>help: {esc(help_text)}</div>" if help_text else "")
            + "</td></tr>"
        )
    return (
        "<table class='grid'><tr><th>severity</th><th>rule</th><th class='num'>layer</th><th>finding</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _severity_counts(report: dict[str, Any]) -> dict[str, int]:
    counts = {"error": 0, "warning": 0, "info": 0}
    for f in report["findings"]:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    return counts


def _delta(value: float | None, base: float | None, text: str) -> str:
    if value is None or base is None or value == base:
        return ""
    change = value - base
    pct = f" ({change / base * 100:+.0f}%)" if base else ""
    cls = "delta-good" if change < 0 else "delta-bad"
    return f' <span class="{cls}">{esc(text)}{esc(pct)}</span>'


def _comparison(reports: list[dict[str, Any]], analyses: list[Analysis]) -> str:
    def signed(size: float) -> str:
        return ("+" if size > 0 else "−") + human(int(abs(size)))

    rows: list[tuple[str, list[str]]] = []
    metrics = [
        ("to pull", "compressed_size"),
        ("unpacked", "uncompressed_size"),
        ("final filesystem", "final_size"),
        ("hidden by later layers", "wasted_bytes"),
    ]
    base = reports[0]
    for label, key in metrics:
        cells = []
        for r in reports:
            value = r[key]
            cells.append(
                esc(human(value))
                + (
                    _delta(value, base[key], signed(value - base[key]))
                    if r is not base and value is not None and base[key] is not None
                    else ""
                )
            )
        rows.append((label, cells))
    pulls = []
    for r in reports:
        seconds = r["pull_estimate"]["seconds"]
        b = base["pull_estimate"]["seconds"]
        text = f"~{seconds} s" if seconds is not None else "unknown"
        if r is not base and seconds is not None and b is not None:
            text += _delta(seconds, b, f"{seconds - b:+.1f} s")
        pulls.append(text)
    rows.append(("pull time", pulls))
    rows.append(("layers", [str(len(r["layers"])) for r in reports]))
    rows.append(("files", [str(sum(layer.files for layer in a.layers)) for a in analyses]))
    rows.append(
        (
            "findings",
            [
                " ".join(f"{severity_badge(sev)} {n}" for sev, n in _severity_counts(r).items() if n)
                or "none"
                for r in reports
            ],
        )
    )
    head = "".join(f"<th>{esc(r['reference'] or r['source'])}</th>" for r in reports)
    body = "".join(
        f"<tr><th>{esc(label)}</th>{''.join(f'<td>{c}</td>' for c in cells)}</tr>" for label, cells in rows
    )
    return f"<table class='grid compare'><tr><th></th>{head}</tr>{body}</table>"


def render(reports: list[dict[str, Any]], analyses: list[Analysis], version: str = "") -> str:
    """The page for one image, or several side by side (the first is the baseline)."""
    count = len(reports)
    gap = 16
    width = PAGE_WIDTH if count == 1 else (PAGE_WIDTH - gap * (count - 1)) / count
    biggest = max(
        [max(a.total_size, a.compressed_size or 0) if not a.walked else a.total_size for a in analyses] + [1]
    )
    body = []
    names = ", ".join(str(r["reference"] or r["source"]) for r in reports)
    ver = f" · gpulint {esc(version)}" if version else ""
    body.append(f'<header class="top"><h1>gpulint image<small>{esc(names)}{ver}</small></h1></header><main>')
    columns = f'<div class="cols" style="grid-template-columns:repeat({count},minmax(0,1fr))">'
    if count > 1:
        body.append("<h2>Comparison</h2>" + _comparison(reports, analyses))
    body.append("<h2>Where the bytes go</h2>")
    body.append(
        '<p class="muted">Click a layer to zoom in, a directory to go further; Escape or the path above goes back. '
        "Hover for sizes."
        + (" Each treemap's area is in proportion to its image's size." if count > 1 else "")
        + "</p>"
    )
    body.append(columns)
    trees = [_flatten(a.layers, a.walked) for a in analyses]
    for i, (report, analysis) in enumerate(zip(reports, analyses, strict=True)):
        size = analysis.total_size if analysis.walked else (analysis.compressed_size or 0)
        height = TREEMAP_HEIGHT * (size / biggest if count > 1 else 1)
        height = max(height, 60.0)
        title = f"<h3>{esc(report['reference'] or report['source'])}</h3>" if count > 1 else ""
        body.append(f"<div>{title}{_treemap(i, *trees[i], width, height)}{_legend(analysis)}</div>")
    body.append("</div>")
    body.append("<h2>Savings per fix</h2>" + columns)
    for report in reports:
        body.append(f"<div>{_bars(report, width)}</div>")
    body.append("</div>")
    for i, report in enumerate(reports):
        body.append(
            f'<section class="image" id="image-{i}"><h2>{esc(report["reference"] or report["source"])}</h2>'
        )
        body.append(
            f'<p class="mono muted">{esc(report["source"])}<br>{esc(report["digest"] or "")} · {esc(report["platform"] or "")}</p>'
        )
        body.append(_cards(report))
        body.append("<h3>Layers</h3>" + _layer_table(i, report, trees[i][0]))
        body.append("<h3>Findings</h3>" + _findings(report))
        body.append("</section>")
    body.append("</main><div id='tip' hidden></div>")
    return page(f"gpulint image: {names}", "".join(body), IMAGE_CSS, IMAGE_JS)
