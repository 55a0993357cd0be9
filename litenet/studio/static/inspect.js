// The Inspect view: the op graph, and for the op clicked its formulas both ways, the lines of litenet.ops
// that compute them, and the current batch's numbers; and one image walked forward then backward op by op.

class InspectView {
  constructor(app) {
    this.app = app;
    this.graph = new OpGraph(app, (name) => app.selectOp(name));
    this.details = h("div", {class: "ls-details", "data-testid": "op-details"}, h("p", {class: "ls-hint"}, "Click an op in the graph."));
    this.walkBox = h("div", {class: "ls-walk"});
    this.el = h("div", {class: "ls-view ls-inspect"}, h("div", {class: "ls-left"}, this.walkBox, this.graph.el), this.details);
    this.walk = null;
    this.drawWalk();
    this.requestValue = throttle((msg) => this.app.send(msg), 80);
  }

  onOp(message) {
    this.current = message;
    this.graph.selected = message.op;
    this.graph.draw();
    this.drawDetails();
  }

  onInspection(inspection) {
    if (this.current && inspection && inspection.selected && inspection.selected.op === this.current.op) {
      this.current.inspection = inspection;
      this.drawNumbers();
    }
  }

  drawDetails() {
    const m = this.current, d = m.details;
    this.numbers = h("div", {class: "ls-numbers"});
    fill(this.details,
      h("h2", {}, m.op), h("div", {class: "ls-dim"}, `${d.kind}: ${d.what} — ${d.kind_doc}`),
      this.direction("Forward", d.forward), this.direction("Backward", d.backward),
      h("h3", {}, "This batch"), this.numbers);
    this.drawNumbers();
  }

  direction(title, part) {
    return h("div", {class: "ls-direction"},
      h("h3", {}, title), h("code", {class: "ls-formula"}, part.formula), h("div", {class: "ls-dim"}, "computed by ", h("code", {}, part.function)),
      part.source.map((block) => h("pre", {class: "ls-source", title: block.file},
        h("div", {class: "ls-source-file"}, `${block.file}:${block.start}`),
        block.lines.map((line, i) => h("div", {}, h("span", {class: "ls-line-no"}, String(block.start + i).padStart(4, " ") + "  "), line)))));
  }

  drawNumbers() {
    const s = this.current.inspection && this.current.inspection.selected;
    if (!this.numbers) return;
    if (!s || s.op !== this.current.op) { fill(this.numbers, h("p", {class: "ls-hint"}, "no numbers yet: Step once")); return; }
    fill(this.numbers,
      h("div", {class: "ls-summaries"}, summaryBox("activation (output)", s.output, "#3a6fc4"),
        summaryBox("gradient ∂L/∂output", s.output_grad, "#d0602a")),
      s.inputs.map((inp) => h("div", {class: "ls-summaries"}, summaryBox(`input ${inp.name}`, inp.value, "#6d8fc8"),
        summaryBox(`∂L/∂${inp.name}`, inp.grad, "#e08a5a"))),
      h("div", {class: "ls-row"}, "whole tensors (.npy): ", ["output", ...s.params.map((p) => p.kind)].map((which) =>
        h("button", {"data-download": which, onclick: () => this.app.send({type: "tensor", op: this.current.op, which})}, which))),
      s.params.map((p) => h("div", {class: "ls-param"},
        h("div", {class: "ls-summaries"}, summaryBox(p.name, p.value, "#555"), summaryBox("∂L/∂" + p.name, p.grad, "#b04a1a")),
        p.picture ? this.picture(p, p.picture, "weight") : null,
        p.grad_picture ? this.picture(p, p.grad_picture, "gradient") : null)));
  }

  // A matrix as an image; the exact value under the cursor is fetched from Python.
  picture(param, picture, what) {
    const label = h("div", {class: "ls-value", "data-testid": "value-" + what}, `${what} ${fmtShape(picture.shape)}: point at a cell`);
    const img = h("img", {src: picture.png, class: "ls-matrix", "data-testid": "matrix-" + what,
      style: {width: Math.min(360, Math.max(120, picture.shape[1] * 2)) + "px"}});
    img.addEventListener("mousemove", (e) => {
      const row = Math.min(picture.shape[0] - 1, Math.floor(e.offsetY / img.clientHeight * picture.shape[0]));
      const col = Math.min(picture.shape[1] - 1, Math.floor(e.offsetX / img.clientWidth * picture.shape[1]));
      this.valueLabel = label;
      if (what === "weight") this.requestValue({type: "value", op: this.current.op, param: param.kind, row, col});
      else label.textContent = `∂ at row ${row}, column ${col} (block of ${picture.block.join(" × ")})`;
    });
    return h("div", {class: "ls-picture"}, h("div", {class: "ls-dim"},
      `${what} of ${param.name}, blue − / red + up to ±${fmt(picture.limit)}` + (picture.block[0] > 1 || picture.block[1] > 1 ? `, ${picture.block.join(" × ")} blocks averaged` : "")), img, label);
  }

  // A whole tensor arrived (on request): saved as a .npy file by the browser.
  onTensor(message) {
    const bytes = Uint8Array.from(atob(message.npy), (c) => c.charCodeAt(0));
    const link = h("a", {href: URL.createObjectURL(new Blob([bytes], {type: "application/octet-stream"})),
      download: `${message.op}.${message.which}.npy`});
    document.body.append(link);
    link.click();
    link.remove();
  }

  onValue(message) {
    if (this.valueLabel) this.valueLabel.textContent = `${message.op}.${message.param}[${message.row}, ${message.col}] = ${message.value}`;
  }

  // -- walking one image ---------------------------------------------------------------------------

  onWalk(message) {
    this.walk = message;
    this.walkAt = 0;
    this.showWalkStep();
  }

  drawWalk() {
    const index = h("input", {type: "number", value: 0, min: 0, style: {width: "5em"}, "data-testid": "walk-index"});
    this.walkStep = h("div", {class: "ls-walk-step"});
    fill(this.walkBox, h("b", {}, "One image, op by op: "), "test image ", index,
      h("button", {"data-testid": "walk", onclick: () => this.app.send({type: "walk", index: parseInt(index.value) || 0})}, "Walk"),
      h("button", {onclick: () => this.moveWalk(-1)}, "◀"), h("button", {"data-testid": "walk-next", onclick: () => this.moveWalk(1)}, "▶"),
      this.walkStep);
  }

  moveWalk(delta) {
    if (!this.walk) return;
    this.walkAt = Math.max(0, Math.min(this.walk.steps.length - 1, this.walkAt + delta));
    this.showWalkStep();
  }

  showWalkStep() {
    const step = this.walk.steps[this.walkAt];
    this.graph.highlight = {op: step.op, dir: step.dir};
    this.graph.draw();
    const o = step.out;
    fill(this.walkStep,
      h("div", {}, `${this.walkAt + 1}/${this.walk.steps.length} · image of a ${this.walk.label}, predicted ${this.walk.predicted} (${percent(this.walk.confidence)}) · `,
        h("b", {class: "ls-walk-" + step.dir}, step.dir), " ", h("code", {}, step.op)),
      h("code", {class: "ls-formula"}, step.formula), " ", h("span", {class: "ls-dim"}, step.function),
      h("div", {class: "ls-stats"}, `${step.dir === "backward" ? "∂ " : ""}${fmtShape(o.shape)} ‖·‖ ${fmt(o.norm)} · mean ${fmt(o.mean)} · min ${fmt(o.min)} · max ${fmt(o.max)} · [${o.values.map((v) => fmt(v)).join(", ")}, …]`
        + (step.loss !== undefined ? ` · loss ${fmt(step.loss)}` : "")
        + (step.join ? ` · paths meet: identity ‖∂‖ ${fmt(step.join.identity)}, branch ${fmt(step.join.branch)}` : "")));
  }
}
