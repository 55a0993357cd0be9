// The Build view: a palette of layers, a canvas to drop and connect them on, shapes checked live by Python.
// The network is the chain of connected layers from an input layer (pixels or patches) to the head.
const NODE_W = 180, GRID_X = 240, GRID_Y = 150, PER_ROW = 4;

class BuildView {
  constructor(app) {
    this.app = app;
    this.nodes = new Map();  // id → {id, kind, settings, x, y, el}
    this.edges = [];         // [{from, to}] by node id; a node has at most one edge out and one in
    this.nextId = 1;
    this.result = null;      // the last "checked" reply
    this.requestCheck = debounce(() => this.app.send({type: "check", layers: this.layers()}), 150);
    this.canvas = h("div", {class: "ls-canvas", "data-testid": "canvas",
      ondragover: (e) => e.preventDefault(), ondrop: (e) => this.drop(e)});
    this.wires = svg("svg", {class: "ls-wires"});
    this.canvas.append(this.wires);
    this.side = h("div", {class: "ls-side"});
    this.palette = h("div", {class: "ls-palette"});
    this.el = h("div", {class: "ls-view ls-build"}, this.palette, this.canvas, this.side);
  }

  // The palette from the layer kinds Python describes.
  setKinds(kinds) {
    this.kinds = kinds;
    fill(this.palette, h("h3", {}, "Layers"), Object.entries(kinds).map(([kind, spec]) =>
      h("div", {class: "ls-palette-item", draggable: "true", title: spec.doc, "data-kind": kind,
        ondragstart: (e) => e.dataTransfer.setData("text/x-litenet-layer", kind),
        ondblclick: () => this.append(kind)}, kind)),
      h("p", {class: "ls-hint"}, "Drag a layer onto the canvas (double-click: add it at the end), then drag from a layer's ● to the next one's ○."));
  }

  // Lay out a layer list as a chain of nodes (a preset, or the network Python holds).
  load(layers) {
    this.nodes.forEach((n) => n.el.remove());
    this.nodes.clear();
    this.edges = [];
    let previous = null;
    layers.forEach((layer, i) => {
      const {kind, ...settings} = layer;
      const node = this.addNode(kind, 20 + (i % PER_ROW) * GRID_X, 20 + Math.floor(i / PER_ROW) * GRID_Y, settings, false);
      if (previous) this.edges.push({from: previous.id, to: node.id});
      previous = node;
    });
    this.changed();
  }

  drop(event) {
    const kind = event.dataTransfer.getData("text/x-litenet-layer");
    if (!kind || !this.kinds[kind]) return;
    event.preventDefault();
    const box = this.canvas.getBoundingClientRect();
    this.addNode(kind, event.clientX - box.left + this.canvas.scrollLeft - NODE_W / 2,
      event.clientY - box.top + this.canvas.scrollTop - 15);
  }

  // Add a layer after the end of the chain, connected to it.
  append(kind) {
    const {order} = this.chain();
    const last = order.length ? this.nodes.get(order[order.length - 1]) : null;
    const i = this.nodes.size;
    const node = this.addNode(kind, 20 + (i % PER_ROW) * GRID_X, 20 + Math.floor(i / PER_ROW) * GRID_Y);
    if (last) this.connect(last.id, node.id);
  }

  addNode(kind, x, y, settings = {}, notify = true) {
    const spec = this.kinds[kind];
    const node = {id: this.nextId++, kind, settings: {}, x: Math.max(12, x), y: Math.max(4, y)};
    for (const s of spec.settings) node.settings[s.name] = s.name in settings ? settings[s.name] : s.default;
    if (settings.name) node.settings.name = settings.name;
    const fields = spec.settings.map((s) => this.field(node, s));
    node.badge = h("div", {class: "ls-badge"});
    node.el = h("div", {class: "ls-node", "data-id": node.id, "data-kind": kind, style: {left: node.x + "px", top: node.y + "px"}},
      h("div", {class: "ls-node-head", onpointerdown: (e) => this.move(e, node)},
        h("span", {}, kind), h("button", {class: "ls-x", title: "remove", onclick: () => this.remove(node.id)}, "×")),
      fields, node.badge,
      h("span", {class: "ls-port ls-in", "data-id": node.id, title: "input"}),
      h("span", {class: "ls-port ls-out", "data-id": node.id, title: "output: drag to the next layer",
        onpointerdown: (e) => this.wire(e, node)}));
    this.canvas.append(node.el);
    this.nodes.set(node.id, node);
    if (notify) this.changed();
    return node;
  }

  // One setting's input: a menu for choices, a box for a flag, a number otherwise.
  field(node, s) {
    const value = node.settings[s.name];
    const set = (v) => { node.settings[s.name] = v; this.changed(); };
    let input;
    if (s.choices) {
      input = h("select", {"data-setting": s.name, onchange: (e) => set(s.type === "int" ? parseInt(e.target.value) : e.target.value)},
        s.choices.map((c) => h("option", {value: c, selected: c === value}, c)));
    } else if (s.type === "bool") {
      input = h("input", {type: "checkbox", checked: value, "data-setting": s.name, onchange: (e) => set(e.target.checked)});
    } else {
      input = h("input", {type: "number", value: value ?? "", step: s.type === "int" ? 1 : "any", "data-setting": s.name,
        oninput: (e) => set(e.target.value === "" ? null : s.type === "int" ? parseInt(e.target.value) : parseFloat(e.target.value))});
    }
    return h("label", {class: "ls-field", title: s.doc}, h("span", {}, s.name), input);
  }

  remove(id) {
    this.nodes.get(id).el.remove();
    this.nodes.delete(id);
    this.edges = this.edges.filter((e) => e.from !== id && e.to !== id);
    this.changed();
  }

  connect(from, to) {
    if (from === to) return;
    this.edges = this.edges.filter((e) => e.from !== from && e.to !== to);
    this.edges.push({from, to});
    this.changed();
  }

  move(event, node) {
    if (event.target.tagName === "BUTTON") return;
    event.preventDefault();
    const start = {x: event.clientX - node.x, y: event.clientY - node.y};
    const moving = (e) => {
      node.x = Math.max(12, e.clientX - start.x);
      node.y = Math.max(0, e.clientY - start.y);
      node.el.style.left = node.x + "px";
      node.el.style.top = node.y + "px";
      this.draw();
    };
    const done = () => { window.removeEventListener("pointermove", moving); window.removeEventListener("pointerup", done); };
    window.addEventListener("pointermove", moving);
    window.addEventListener("pointerup", done);
  }

  // Drag a wire from a node's output; dropped on another node's input, it connects them.
  wire(event, node) {
    event.preventDefault();
    event.stopPropagation();
    const box = this.canvas.getBoundingClientRect();
    const temp = svg("path", {class: "ls-wire ls-temp"});
    this.wires.append(temp);
    const from = this.port(node, "out");
    const moving = (e) => {
      const x = e.clientX - box.left + this.canvas.scrollLeft, y = e.clientY - box.top + this.canvas.scrollTop;
      temp.setAttribute("d", curve(from, {x, y}));
    };
    const done = (e) => {
      window.removeEventListener("pointermove", moving);
      window.removeEventListener("pointerup", done);
      temp.remove();
      const target = document.elementFromPoint(e.clientX, e.clientY);
      const nodeEl = target && target.closest(".ls-node");
      if (nodeEl && this.canvas.contains(nodeEl)) this.connect(node.id, Number(nodeEl.dataset.id));
    };
    window.addEventListener("pointermove", moving);
    window.addEventListener("pointerup", done);
  }

  // Where a wire meets a node: its port's centre (studio.css places the ports 5 px from the top, 16 px tall).
  port(node, side) {
    return {x: node.x + (side === "out" ? node.el.offsetWidth || NODE_W : 0), y: node.y + 13};
  }

  // The chain from its input layer: {order: [ids], loose: [ids not on it]}.
  chain() {
    const next = new Map(this.edges.map((e) => [e.from, e.to]));
    const hasIn = new Set(this.edges.map((e) => e.to));
    const starts = [...this.nodes.values()].filter((n) => !hasIn.has(n.id));
    const start = starts.find((n) => this.kinds[n.kind].reads === "images") || starts[0];
    const order = [];
    for (let id = start && start.id; id !== undefined && !order.includes(id); id = next.get(id)) order.push(id);
    return {order, loose: [...this.nodes.keys()].filter((id) => !order.includes(id))};
  }

  layers() {
    return this.chain().order.map((id) => {
      const n = this.nodes.get(id);
      return {kind: n.kind, ...n.settings};
    });
  }

  changed() {
    this.draw();
    this.requestCheck();
  }

  onChecked(result) {
    this.result = result;
    this.draw();
  }

  // Wires with their labels (the shape that flows, or why it cannot), badges, and the totals.
  draw() {
    const {order, loose} = this.chain();
    const rows = (this.result && this.result.layers.length === order.length) ? this.result.layers : null;
    let width = 0, height = 0;
    this.nodes.forEach((n) => {
      width = Math.max(width, n.x + NODE_W + 40);
      height = Math.max(height, n.y + (n.el.offsetHeight || 80) + 40);
      n.el.classList.toggle("ls-loose", loose.includes(n.id));
      const row = rows && rows[order.indexOf(n.id)];
      n.el.classList.toggle("ls-bad", !!(row && row.problem));
      fill(n.badge, row && row.problem ? row.problem : row && row.shape ? "→ " + fmtShape(row.shape) + (row.params ? " · " + fmtCount(row.params) + " params" : "") : "");
    });
    this.wires.setAttribute("width", width);
    this.wires.setAttribute("height", height);
    const drawn = this.edges.map((e) => {
      const a = this.nodes.get(e.from), b = this.nodes.get(e.to);
      const i = order.indexOf(b.id);
      const row = rows && i > 0 && order[i - 1] === a.id ? rows[i] : null;
      const bad = !!(row && row.problem);
      const p = this.port(a, "out"), q = this.port(b, "in");
      const label = row ? (bad ? row.problem : fmtShape(row.given)) : "";
      return [svg("path", {class: "ls-wire" + (bad ? " ls-bad" : ""), d: curve(p, q), "data-from": e.from, "data-to": e.to}),
        label ? svg("text", {class: "ls-wire-label" + (bad ? " ls-bad" : ""), x: (p.x + q.x) / 2, y: (p.y + q.y) / 2 - 6,
          "text-anchor": "middle"}, bad ? label.replace(/^layer \d+ \([a-z_]+\): /, "") : label) : null];
    });
    fill(this.wires, drawn.flat());
    this.drawSide(order, loose);
  }

  // The side panel's controls are made once (what a person types survives the checks' redraws); drawSide
  // refreshes the totals, the problems and which buttons may be pressed.
  makeSide() {
    this.totals = h("div", {class: "ls-totals"});
    this.problemBox = h("div");
    this.buildButton = h("button", {class: "ls-primary", "data-testid": "build",
      onclick: () => this.app.send({type: "build", layers: this.layers()})}, "Build (fresh weights)");
    this.presetSelect = h("select", {"data-testid": "preset-select"});
    this.nameInput = h("input", {type: "text", value: "my-network", "data-testid": "preset-name"});
    this.saveButton = h("button", {"data-testid": "save-preset", onclick: () =>
      this.app.send({type: "save_preset", name: this.nameInput.value, description: "composed in LiteNet Studio",
        layers: this.layers()})}, "Save as preset");
    this.savedNote = h("div", {class: "ls-note", "data-testid": "saved", hidden: true});
    fill(this.side, h("h3", {}, "Network"), this.totals, this.problemBox, this.buildButton,
      h("h3", {}, "Presets"),
      h("div", {class: "ls-row"}, this.presetSelect,
        h("button", {onclick: () => this.app.send({type: "load_preset", name: this.presetSelect.value})}, "Load")),
      h("div", {class: "ls-row"}, this.nameInput, this.saveButton), this.savedNote);
  }

  // The presets to load, and the name the network is saved under (when Python's network changes).
  setPresets(presets, current) {
    if (!this.totals) this.makeSide();
    fill(this.presetSelect, presets.map((p) => h("option", {value: p, selected: p === current}, p)));
    this.nameInput.value = current;
  }

  showSaved(saved) {
    this.savedNote.hidden = false;
    fill(this.savedNote, "saved ", h("code", {}, saved.path), h("br"), "train it: ", h("code", {}, saved.command));
  }

  drawSide(order, loose) {
    if (!this.totals) this.makeSide();
    const r = this.result;
    const problems = r ? r.layers.map((row) => row.problem).filter(Boolean) : [];
    if (r && r.problem) problems.push(r.problem);
    if (loose.length) problems.push(`${loose.length} layer(s) not connected to the chain: connect or remove them`);
    const ok = !!(r && r.ok && !loose.length && order.length > 0);
    fill(this.totals,
      h("div", {}, "parameters ", h("b", {"data-testid": "param-count"}, r ? fmtCount(r.params) : "–")),
      h("div", {}, "FLOPs per image ", h("b", {"data-testid": "flops"}, r ? fmtCount(r.flops) : "–")),
      h("div", {}, "layers ", h("b", {}, order.length)));
    fill(this.problemBox, problems.length ? h("ul", {class: "ls-problems"}, problems.map((p) => h("li", {}, p)))
      : h("p", {class: "ls-ok"}, "✓ every shape fits"));
    this.buildButton.disabled = !ok;
    this.saveButton.disabled = !ok;
  }
}

// A wire's curve from p to q.
function curve(p, q) {
  const dx = Math.max(40, Math.abs(q.x - p.x) / 2);
  return `M${p.x},${p.y} C${p.x + dx},${p.y} ${q.x - dx},${q.y} ${q.x},${q.y}`;
}
