// The widget: tabs for Build, Train, Inspect, Images and Export over one connection to the Python side.
// `model` is anywidget's (in a notebook) or page.js's (in `litenet studio`'s page): send() and on("msg:custom").

class Studio {
  constructor(model, el) {
    this.model = model;
    this.el = el;
    this.state = null;
    this.running = false;
    this.updates = 0;  // progress messages drawn (the benchmark and the browser tests read it)
    this.build = new BuildView(this);
    this.train = this.trainView();
    this.inspect = new InspectView(this);
    this.images = new ImagesView(this);
    this.takeout = this.exportView();
    this.banner = h("div", {class: "ls-banner", "data-testid": "banner", hidden: true});
    this.status = h("span", {class: "ls-status", "data-testid": "status"}, "connecting…");
    this.tabs = {build: this.build.el, train: this.train, inspect: this.inspect.el, images: this.images.el, export: this.takeout};
    this.tabBar = h("nav", {class: "ls-tabs"}, Object.keys(this.tabs).map((name) =>
      h("button", {"data-tab": name, onclick: () => this.show(name)}, name[0].toUpperCase() + name.slice(1))));
    el.classList.add("ls-studio");
    fill(el, h("header", {}, h("b", {}, "LiteNet Studio"), this.tabBar, this.status), this.banner, Object.values(this.tabs));
    this.show("build");
    model.on("msg:custom", (message) => this.receive(message));
    this.send({type: "hello"});
  }

  send(message) {
    this.model.send(message);
  }

  show(name) {
    this.current = name;
    for (const [key, view] of Object.entries(this.tabs)) view.hidden = key !== name;
    this.tabBar.querySelectorAll("button").forEach((b) => b.classList.toggle("ls-active", b.dataset.tab === name));
    if (name === "images") this.images.shown();
    if (name === "train") { this.graph.draw(); drawCurves(this.curveCanvas, this.curves || {step: []}, this.state && this.state.total_steps); }
    if (name === "inspect") this.inspect.graph.draw();
  }

  say(text, kind = "error") {
    this.banner.hidden = !text;
    this.banner.className = "ls-banner ls-" + kind;
    fill(this.banner, text ? [h("span", {}, text), h("button", {onclick: () => this.say("")}, "×")] : []);
  }

  selectOp(name) {
    this.show("inspect");
    this.send({type: "select", op: name});
  }

  receive(m) {
    const handlers = {
      state: () => this.onState(m), checked: () => this.build.onChecked(m.result), progress: () => this.onProgress(m),
      running: () => this.setRunning(true), paused: () => { this.setRunning(false); if (m.reason !== "paused") this.say(m.reason, "note"); },
      alarm: () => { this.setRunning(false); this.state.alarm = m; this.say(m.message, "alarm"); this.graph.draw(); this.inspect.graph.draw(); },
      error: () => this.say(m.message), op: () => this.inspect.onOp(m), value: () => this.inspect.onValue(m),
      tensor: () => this.inspect.onTensor(m),
      walk: () => this.inspect.onWalk(m), gallery: () => this.images.onGallery(m), explanation: () => this.images.onExplanation(m),
      confusion: () => this.images.onConfusion(m), exported: () => this.onExported(m), log: () => this.log(m.line),
      saved: () => { this.build.showSaved(m); this.state.name = m.name; this.drawStatus(); this.say(`saved ${m.path}`, "note"); },
    };
    (handlers[m.type] || (() => {}))();
  }

  onState(m) {
    this.state = m;
    this.say(m.alarm ? m.alarm.message : "", m.alarm ? "alarm" : "note");
    this.build.setKinds(m.kinds);
    this.build.setPresets(m.presets, m.name);
    this.build.load(m.layers);
    this.curves = {step: [...m.curves.step], loss: [...m.curves.loss], held_out: [...m.curves.held_out]};
    this.graph.setOps(m.ops);
    this.inspect.graph.setOps(m.ops);
    this.setInspection(m.inspection);
    this.drawSettings();
    this.setRunning(m.running);
    this.drawStatus();
  }

  onProgress(m) {
    const r = m.record;
    this.state.steps = r.step;
    this.state.total_steps = m.total_steps;
    this.curves.step.push(r.step);
    this.curves.loss.push(r.loss);
    if (r.held_out) this.curves.held_out.push(r.held_out);
    this.lastRecord = r;
    if (m.inspection) this.setInspection(m.inspection);
    this.updates += 1;
    this.drawStatus();
    if (this.current === "train") drawCurves(this.curveCanvas, this.curves, this.state.total_steps);
  }

  setInspection(inspection) {
    if (!inspection) return;
    this.graph.setInspection(inspection);
    this.inspect.graph.setInspection(inspection);
    this.inspect.onInspection(inspection);
  }

  setRunning(running) {
    this.running = running;
    this.el.classList.toggle("ls-is-running", running);
    this.drawStatus();
  }

  drawStatus() {
    if (!this.state) return;
    const r = this.lastRecord, held = this.curves && this.curves.held_out[this.curves.held_out.length - 1];
    const text = `${this.state.name} · step ${this.state.steps}/${this.state.total_steps}` +
      (r ? ` · loss ${fmt(r.loss)} · lr ${fmt(r.lr)}` : "") + (held ? ` · held-out ${percent(held.accuracy)}` : "") +
      (this.running ? " · running" : "");
    this.status.textContent = text;
    if (this.trainStatus) this.trainStatus.textContent = text;
  }

  // -- the Train view --------------------------------------------------------------------------------

  trainView() {
    this.graph = new OpGraph(this, (name) => this.selectOp(name));
    this.curveCanvas = h("canvas", {width: 560, height: 230, class: "ls-curves", "data-testid": "curves"});
    this.settingsBox = h("div", {class: "ls-settings"});
    this.trainStatus = h("div", {class: "ls-train-status", "data-testid": "train-status"});
    return h("div", {class: "ls-view ls-train"},
      h("div", {class: "ls-left"},
        h("div", {class: "ls-row"},
          h("button", {"data-testid": "step", onclick: () => this.send({type: "step", count: 1})}, "Step"),
          h("button", {"data-testid": "run", class: "ls-primary", onclick: () => this.send({type: "run"})}, "Run"),
          h("button", {"data-testid": "pause", onclick: () => this.send({type: "pause"})}, "Pause"),
          h("button", {"data-testid": "reset", onclick: () => this.send({type: "reset"})}, "Reset")),
        this.trainStatus, this.curveCanvas,
        h("div", {class: "ls-legend"}, h("span", {class: "ls-key-loss"}, "— training loss (mean)"), " ",
          h("span", {class: "ls-key-held"}, "● held-out loss"), " ", h("span", {class: "ls-key-acc"}, "— held-out accuracy (right)")),
        this.settingsBox),
      h("div", {class: "ls-right"}, h("div", {class: "ls-legend"}, "edges: ", h("span", {class: "ls-key-fwd"}, "→ activation norm"), " ",
        h("span", {class: "ls-key-bwd"}, "← gradient norm"), " (per image); arcs: the residual identity path and its share of ∂; click an op"),
        this.graph.el));
  }

  drawSettings() {
    const t = this.state.train, inputs = {};
    const number = (key, step) => (inputs[key] = h("input", {type: "number", value: t[key], step, "data-setting": key}));
    const choice = (key) => (inputs[key] = h("select", {"data-setting": key},
      [...new Set([t[key], ...this.state.choices[key]])].map((c) => h("option", {value: c, selected: c === t[key]}, c))));
    fill(this.settingsBox, h("h3", {}, "Recipe"),
      h("label", {}, "lr_base ", number("lr_base", "any")), h("label", {}, "batch ", number("batch_size", 1)),
      h("label", {}, "epochs ", number("epochs", 1)), h("label", {}, "optimiser ", choice("optimizer")),
      h("label", {}, "augment ", choice("augment")),
      h("button", {"data-testid": "apply", onclick: () => this.send({type: "configure", settings: {
        lr_base: parseFloat(inputs.lr_base.value), batch_size: parseInt(inputs.batch_size.value), epochs: parseInt(inputs.epochs.value),
        optimizer: inputs.optimizer.value, augment: inputs.augment.value}})}, "Apply"),
      h("div", {class: "ls-dim"}, `schedule ${t.schedule} after ${t.warmup_steps} warm-up steps · loss ${t.loss} · ` +
        `${this.state.steps_per_epoch} steps an epoch on ${this.state.images.train.toLocaleString()} images · backend ${this.state.backend}`));
    drawCurves(this.curveCanvas, this.curves, this.state.total_steps);
  }

  // -- the Export view -------------------------------------------------------------------------------

  exportView() {
    const int8 = h("input", {type: "checkbox", "data-testid": "int8"});
    this.exportLog = h("pre", {class: "ls-log"});
    this.exportResult = h("div", {"data-testid": "exported"});
    return h("div", {class: "ls-view ls-export"},
      h("h3", {}, "Take it out: ONNX for litenet-infer, on a GPU, a CPU or a Raspberry Pi"),
      h("label", {}, int8, " also int8 (calibrated on training images, QDQ ONNX and LiteNet's int8 plan)"), " ",
      h("button", {class: "ls-primary", "data-testid": "export", onclick: () => {
        fill(this.exportLog); fill(this.exportResult, "exporting…"); this.send({type: "export", int8: int8.checked});
      }}, "Export"),
      this.exportLog, this.exportResult);
  }

  log(line) {
    this.exportLog.append(line + "\n");
  }

  onExported(m) {
    fill(this.exportResult,
      h("div", {}, "wrote ", h("code", {}, m.folder)),
      h("table", {class: "ls-files"}, h("tr", {}, h("th", {}, "file"), h("th", {}, "size"), h("th", {}, "test accuracy")),
        m.files.map((f) => h("tr", {}, h("td", {}, f.name), h("td", {}, fmtCount(f.bytes) + "B"), h("td", {}, percent(f.accuracy))))),
      h("div", {}, `fp32 ONNX against the NumPy forward: max |Δlogit| ${fmt(m.fp32_check.max_abs_diff)}`),
      h("h3", {}, "Run it"), m.commands.map((c) => h("div", {class: "ls-command"}, h("div", {class: "ls-dim"}, c.where), h("code", {}, c.command))));
  }
}

function render({model, el}) {
  const studio = new Studio(model, el);
  globalThis.litenetStudio = studio;  // for the browser tests and the benchmark
  return () => { if (globalThis.litenetStudio === studio) globalThis.litenetStudio = null; };
}

export default {render};
