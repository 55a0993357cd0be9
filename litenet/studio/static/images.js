// The Images view: pick a test image or drop your own — prediction, top 3, saliency (gradient × input) —
// and the confusion matrix with the images the model gets most wrong.

class ImagesView {
  constructor(app) {
    this.app = app;
    this.page = 0;
    this.gallery = h("div", {class: "ls-gallery", "data-testid": "gallery"});
    this.result = h("div", {class: "ls-explain", "data-testid": "explanation"}, h("p", {class: "ls-hint"}, "Pick an image."));
    this.confusion = h("div", {class: "ls-confusion-box"});
    const file = h("input", {type: "file", accept: "image/*", "data-testid": "upload", onchange: (e) => this.upload(e.target.files[0])});
    const drop = h("div", {class: "ls-drop", ondragover: (e) => e.preventDefault(),
      ondrop: (e) => { e.preventDefault(); this.upload(e.dataTransfer.files[0]); }}, "drop your own image here, or ", file);
    this.el = h("div", {class: "ls-view ls-images"},
      h("div", {class: "ls-left"}, h("h3", {}, "Test images"), this.gallery,
        h("button", {onclick: () => this.more()}, "Other images"), drop, this.result),
      h("div", {class: "ls-right"}, h("h3", {}, "Where it goes wrong"),
        h("button", {"data-testid": "score", onclick: () => this.app.send({type: "confusion"})}, "Score 2,000 test images"), this.confusion));
  }

  shown() {
    if (!this.loaded) { this.loaded = true; this.app.send({type: "gallery", page: this.page}); }
  }

  more() {
    this.page += 1;
    this.app.send({type: "gallery", page: this.page});
  }

  upload(file) {
    if (!file) return;
    const reader = new FileReader();
    reader.onload = () => this.app.send({type: "explain", data: reader.result, filename: file.name});
    reader.readAsDataURL(file);
  }

  onGallery(message) {
    fill(this.gallery, message.images.map((im) => h("img", {src: im.url, title: `#${im.index} ${im.label}`, class: "ls-thumb",
      "data-index": im.index, onclick: () => this.app.send({type: "explain", index: im.index})})));
  }

  onExplanation(m) {
    const unit = m.score_kind === "probability" ? percent : fmt;
    fill(this.result,
      h("div", {class: "ls-explain-images"},
        h("figure", {}, h("img", {src: m.image, class: "ls-big"}), h("figcaption", {}, m.filename || `test image #${m.index}`)),
        h("figure", {}, h("img", {src: m.saliency, class: "ls-big", "data-testid": "saliency"}),
          h("figcaption", {}, "gradient × input: red raises the predicted class, blue lowers it"))),
      h("div", {class: "ls-prediction"}, "predicted ", h("b", {"data-testid": "predicted"}, m.predicted),
        m.label ? ` (true: ${m.label})` : ""),
      h("ol", {class: "ls-top"}, m.top.map((t) => h("li", {}, h("span", {class: "ls-bar", style: {width: (m.score_kind === "probability" ? 120 * t.score : 40) + "px"}}),
        ` ${t.class} ${unit(t.score)}`))));
  }

  onConfusion(m) {
    fill(this.confusion,
      h("div", {}, `accuracy ${percent(m.accuracy)} on ${m.images} test images`), confusionTable(m),
      h("h3", {}, "The most wrong (highest loss)"),
      h("div", {class: "ls-gallery"}, m.worst.map((w) => h("figure", {class: "ls-worst"},
        h("img", {src: w.url, class: "ls-thumb", onclick: () => this.app.send({type: "explain", index: w.index})}),
        h("figcaption", {}, `${w.label} → ${w.predicted}`)))));
  }
}
