// Curves (the training loss every step, the held-out batch's loss and accuracy), histograms, the confusion matrix.

// The loss every step (grey), its running mean (dark), the held-out loss (dots) and accuracy (green, right axis).
function drawCurves(canvas, curves, totalSteps) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 44, R = 44, T = 12, B = 24;
  ctx.clearRect(0, 0, W, H);
  ctx.font = "11px sans-serif";
  ctx.fillStyle = "#555";
  const steps = curves.step, loss = curves.loss, held = curves.held_out || [];
  if (!steps.length) { ctx.fillText("no steps yet: press Step or Run", L, H / 2); return; }
  const xmax = Math.max(steps[steps.length - 1], 10);
  const all = loss.concat(held.map((p) => p.loss)).filter((v) => v !== null && Number.isFinite(v));
  const ymax = Math.max(...all) * 1.05, ymin = Math.min(0, Math.min(...all));
  const X = (s) => L + (W - L - R) * s / xmax, Y = (v) => T + (H - T - B) * (1 - (v - ymin) / (ymax - ymin || 1));
  const A = (a) => T + (H - T - B) * (1 - a);
  ctx.strokeStyle = "#ccc"; ctx.beginPath(); ctx.moveTo(L, T); ctx.lineTo(L, H - B); ctx.lineTo(W - R, H - B); ctx.stroke();
  for (let k = 0; k <= 4; k++) {
    const v = ymin + (ymax - ymin) * k / 4;
    ctx.fillText(fmt(v, 2), 4, Y(v) + 4);
    ctx.fillText((25 * k) + "%", W - R + 6, A(k / 4) + 4);
  }
  ctx.fillText("step " + steps[steps.length - 1] + (totalSteps ? " / " + totalSteps : ""), W / 2 - 30, H - 6);
  const line = (xs, ys, colour, width) => {
    ctx.strokeStyle = colour; ctx.lineWidth = width; ctx.beginPath();
    xs.forEach((x, i) => (i ? ctx.lineTo(X(x), Y(ys[i])) : ctx.moveTo(X(x), Y(ys[i]))));
    ctx.stroke();
  };
  line(steps, loss, "#bbb", 1);
  const smooth = [];
  loss.reduce((m, v, i) => (smooth[i] = i ? 0.9 * m + 0.1 * v : v), 0);
  line(steps, smooth, "#333", 2);
  ctx.fillStyle = "#d0602a";
  held.forEach((p) => { ctx.beginPath(); ctx.arc(X(p.step), Y(p.loss), 3, 0, 7); ctx.fill(); });
  if (held.length) {
    ctx.strokeStyle = "#2a8a3a"; ctx.lineWidth = 2; ctx.beginPath();
    held.forEach((p, i) => (i ? ctx.lineTo(X(p.step), A(p.accuracy)) : ctx.moveTo(X(p.step), A(p.accuracy))));
    ctx.stroke();
  }
  ctx.lineWidth = 1;
}

// A histogram of a tensor's values (a summary's hist: lo, hi, counts).
function drawHistogram(canvas, hist, colour) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height;
  ctx.clearRect(0, 0, W, H);
  ctx.font = "10px sans-serif";
  if (!hist || !hist.counts || !hist.counts.length) { ctx.fillStyle = "#888"; ctx.fillText("no values", 4, H / 2); return; }
  const n = hist.counts.length, top = Math.max(...hist.counts) || 1, bw = (W - 8) / n;
  ctx.fillStyle = colour;
  hist.counts.forEach((c, i) => ctx.fillRect(4 + i * bw, H - 14 - (H - 20) * c / top, Math.max(1, bw - 1), (H - 20) * c / top));
  ctx.fillStyle = "#555";
  ctx.fillText(fmt(hist.lo), 2, H - 2);
  const hiText = fmt(hist.hi);
  ctx.fillText(hiText, W - 6 * hiText.length - 2, H - 2);
  if (hist.lo < 0 && hist.hi > 0) {  // where zero is
    const x = 4 + (W - 8) * (-hist.lo) / (hist.hi - hist.lo);
    ctx.strokeStyle = "#999"; ctx.beginPath(); ctx.moveTo(x, 2); ctx.lineTo(x, H - 14); ctx.stroke();
  }
}

// A summary as a histogram and its numbers.
function summaryBox(title, summary, colour) {
  if (!summary) return h("div", {class: "ls-summary ls-empty"}, h("div", {class: "ls-summary-title"}, title), "not computed");
  const canvas = h("canvas", {width: 220, height: 80});
  drawHistogram(canvas, summary.hist, colour);
  return h("div", {class: "ls-summary"},
    h("div", {class: "ls-summary-title"}, title, " ", h("span", {class: "ls-dim", title: "the batch's tensor; the patch tensors are stored (T, B, d)"}, "batch " + fmtShape(summary.shape))),
    canvas,
    h("div", {class: "ls-stats"}, `mean ${fmt(summary.mean)} · std ${fmt(summary.std)} · min ${fmt(summary.min)} · max ${fmt(summary.max)}`));
}

// The confusion matrix: rows the true class, columns the prediction, cells shaded by their share of the row.
function confusionTable(result) {
  const m = result.matrix, classes = result.classes;
  return h("table", {class: "ls-confusion", "data-testid": "confusion"},
    h("tr", {}, h("th", {}, "true \\ predicted"), classes.map((c) => h("th", {}, c.slice(0, 5)))),
    m.map((row, t) => {
      const total = row.reduce((a, b) => a + b, 0) || 1;
      return h("tr", {}, h("th", {}, classes[t]), row.map((v, p) => h("td", {
        style: {background: `rgba(${p === t ? "42,138,58" : "208,96,42"}, ${(v / total).toFixed(3)})`}}, v)));
    }));
}
