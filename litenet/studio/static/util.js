// Small helpers shared by every part: elements, numbers, timing.
const SVG_NS = "http://www.w3.org/2000/svg";

// h("div", {class: "x", onclick: f}, child, "text") → an element; attributes named on* become listeners.
function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// The same for SVG elements.
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  for (const child of children.flat()) if (child) node.append(child instanceof Node ? child : String(child));
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "style" && typeof value === "object") Object.assign(node.style, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
}

// A number for people: 3 significant digits, exponent form when very small or large; "–" for none.
function fmt(x, digits = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return x.toExponential(digits - 1);
  return Number(x.toPrecision(digits)).toString();
}

// 1234567 → "1.23 M"
function fmtCount(n) {
  if (n >= 1e9) return fmt(n / 1e9) + " G";
  if (n >= 1e6) return fmt(n / 1e6) + " M";
  if (n >= 1e3) return fmt(n / 1e3) + " k";
  return String(n);
}

function fmtShape(shape) {
  return shape ? "(" + shape.join(", ") + ")" : "?";
}

function percent(x) {
  return x === null || x === undefined ? "–" : (100 * x).toFixed(1) + " %";
}

function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

// At most one call per `ms`; the last call in a burst still happens.
function throttle(fn, ms) {
  let last = 0, timer = null, pending = null;
  return (...args) => {
    pending = args;
    const wait = last + ms - Date.now();
    if (wait <= 0) { last = Date.now(); fn(...pending); }
    else if (!timer) timer = setTimeout(() => { timer = null; last = Date.now(); fn(...pending); }, wait);
  };
}

// Replace every child of `node` with `children`.
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}
