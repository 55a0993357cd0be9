// The op graph: every op of the network, a row per layer, and on every edge the forward activation norm
// (blue, →) and the backward gradient norm (orange, ←) of the last inspected step; the residual's
// identity edge arcs over its branch with the identity path's share of the gradient.
const OP_W = 112, OP_H = 34, OP_GAP = 26, ROW_GAP = 58, PAD = 24, PER_LINE = 5;

class OpGraph {
  constructor(app, onSelect) {
    this.app = app;
    this.onSelect = onSelect;
    this.svg = svg("svg", {class: "ls-graph"});
    this.el = h("div", {class: "ls-graph-box"}, this.svg);
    this.positions = new Map();
    this.highlight = null;  // {op, dir} while walking one image
  }

  // A line per layer, long layers (a Mixer block: its token half, then its channel half) wrapped every PER_LINE ops.
  setOps(ops) {
    this.ops = ops;
    this.positions.clear();
    const layers = [];
    for (const op of ops) (layers[op.layer] = layers[op.layer] || []).push(op);
    const lines = layers.filter(Boolean).flatMap((layer) =>
      Array.from({length: Math.ceil(layer.length / PER_LINE)}, (_, k) => layer.slice(k * PER_LINE, (k + 1) * PER_LINE)));
    let y = PAD + 30;  // room above the first line for identity arcs
    this.width = 0;
    for (const line of lines) {
      line.forEach((op, i) => this.positions.set(op.name, {x: PAD + i * (OP_W + OP_GAP), y}));
      this.width = Math.max(this.width, PAD * 2 + line.length * (OP_W + OP_GAP));
      y += OP_H + ROW_GAP;
    }
    this.positions.set("loss", {x: PAD, y});
    this.height = y + OP_H + PAD;
    this.draw();
  }

  setInspection(inspection) {
    this.inspection = inspection;
    this.draw();
  }

  // Redrawn only while it is on screen (the Train and the Inspect view each have one); a hidden graph is
  // redrawn when its view is shown.
  draw() {
    if (!this.ops) return;
    if (!this.el.isConnected || this.el.closest("[hidden]")) { this.stale = true; return; }
    this.stale = false;
    const edges = (this.inspection && this.inspection.edges) || this.ops.flatMap((op) =>
      op.inputs.map((name, i) => ({from: name, to: op.name, identity: op.kind === "residual" && i === 0})));
    const nodes = (this.inspection && this.inspection.nodes) || {};
    const scale = (key) => {
      const logs = edges.map((e) => e[key]).filter((v) => v > 0).map(Math.log10);
      const lo = Math.min(...logs), hi = Math.max(...logs);
      return (v) => (v > 0 && hi > lo) ? 1 + 4 * (Math.log10(v) - lo) / (hi - lo) : 1.5;
    };
    const fw = scale("forward"), bw = scale("backward");
    const alarm = this.app.state && this.app.state.alarm;
    const parts = [];
    for (const e of edges) {
      const a = this.positions.get(e.from), b = this.positions.get(e.to);
      if (!a || !b) continue;  // the images' edge starts off the graph
      const path = this.edgePath(a, b, e.identity);
      const tip = `${e.from} → ${e.to}\nforward ‖x‖ per image ${fmt(e.forward)}\nbackward ‖∂x‖ per image ${fmt(e.backward)}` +
        (e.shares ? `\nidentity path's share of ∂ at ${e.from}: ${percent(e.shares.projection)} (projection), ${percent(e.shares.norm)} (norm)` : "");
      const flowing = this.app.running ? " ls-flowing" : "";
      parts.push(svg("g", {class: "ls-edge" + (e.identity ? " ls-identity" : ""), "data-from": e.from, "data-to": e.to},
        svg("title", {}, tip),
        svg("path", {d: path, class: "ls-fwd" + flowing, "stroke-width": fw(e.forward)}),
        e.backward != null ? svg("path", {d: path, class: "ls-bwd" + flowing, "stroke-width": bw(e.backward), transform: "translate(0,3)"}) : null,
        e.forward != null ? this.edgeLabel(a, b, e) : null));
    }
    for (const op of this.ops) {
      const p = this.positions.get(op.name);
      const classes = ["ls-op", "ls-kind-" + op.kind];
      if (this.selected === op.name) classes.push("ls-selected");
      if (this.highlight && this.highlight.op === op.name) classes.push("ls-walk-" + this.highlight.dir);
      if (alarm && alarm.op === op.name) classes.push("ls-nan");
      const grad = nodes[op.name] ? `\n‖∂ parameters‖ ${fmt(nodes[op.name].grad_norm)}` : "";
      parts.push(svg("g", {class: classes.join(" "), transform: `translate(${p.x},${p.y})`, "data-op": op.name,
        onclick: () => this.onSelect(op.name)},
        svg("title", {}, `${op.name} (${op.kind}) ${fmtShape(op.shape)}${grad}`),
        svg("rect", {width: OP_W, height: OP_H, rx: 6}),
        svg("text", {x: OP_W / 2, y: 14, "text-anchor": "middle", class: "ls-op-name"}, shortName(op.name)),
        svg("text", {x: OP_W / 2, y: 27, "text-anchor": "middle", class: "ls-op-kind"}, op.kind + " " + fmtShape(op.shape))));
    }
    const loss = this.positions.get("loss");
    parts.push(svg("g", {class: "ls-op ls-loss", transform: `translate(${loss.x},${loss.y})`},
      svg("rect", {width: OP_W, height: OP_H, rx: 17}), svg("text", {x: OP_W / 2, y: 21, "text-anchor": "middle"}, "loss")));
    this.svg.setAttribute("width", this.width);
    this.svg.setAttribute("height", this.height);
    fill(this.svg, parts);
  }

  edgePath(a, b, identity) {
    if (identity) {  // over the branch: from the top of the join's input to the top of the join
      const x1 = a.x + OP_W / 2, x2 = b.x + OP_W / 2, top = Math.min(a.y, b.y) - 26;
      return `M${x1},${a.y} C${x1},${top} ${x2},${top} ${x2},${b.y}`;
    }
    if (a.y === b.y) return `M${a.x + OP_W},${a.y + OP_H / 2} L${b.x},${b.y + OP_H / 2}`;
    const x1 = a.x + OP_W / 2, y1 = a.y + OP_H, x2 = b.x + OP_W / 2, y2 = b.y;
    return `M${x1},${y1} C${x1},${y1 + 30} ${x2},${y2 - 30} ${x2},${y2}`;
  }

  edgeLabel(a, b, e) {
    let x, y;
    if (e.identity) { x = (a.x + b.x) / 2 + OP_W / 2; y = Math.min(a.y, b.y) - 12; }
    else if (a.y === b.y) { x = (a.x + OP_W + b.x) / 2; y = a.y - 3; }
    else { x = (a.x + b.x) / 2 + OP_W / 2; y = (a.y + OP_H + b.y) / 2; }
    const share = e.shares ? ` id ${percent(e.shares.projection)}` : "";
    return svg("text", {x, y, "text-anchor": "middle", class: "ls-edge-label"},
      svg("tspan", {class: "ls-fwd-text"}, "→" + fmt(e.forward, 2)),
      e.backward != null ? svg("tspan", {class: "ls-bwd-text"}, " ←" + fmt(e.backward, 2)) : null,
      share ? svg("tspan", {class: "ls-share-text"}, share) : null);
  }
}

// "blocks.3.channel_fc1" → "3 channel_fc1"
function shortName(name) {
  return name.replace(/^blocks\.(\d+)\./, "$1 ");
}
